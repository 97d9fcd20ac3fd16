/* options: deskboxd's command line and --config files (the long options
 * and their defaults; deskboxd --help lists them).  Only main.c uses it:
 * it is the command line's front end, so it alone besides main.c writes
 * to the terminal (the usage, and what is wrong with an option).  Knows
 * the sandbox and network subsystems' option types (pool sizes, network
 * modes), never a running server. */
#ifndef DESKBOX_SERVER_OPTIONS_OPTIONS_H
#define DESKBOX_SERVER_OPTIONS_OPTIONS_H

#include <stddef.h>

#include "server/network/network.h"
#include "server/sandbox/sandbox.h"

struct options {
	const char *listen;
	const char *state_dir;
	const char *token;
	const char *runtime;
	unsigned max_sandboxes;
	int exec_timeout_default_s;
	int exec_timeout_max_s;
	size_t exec_max_output;
	long long disk_quota_mb;
	enum disk_store_mode disk_store; /* --disk-store auto|pool|direct */
	long long disk_store_mb;	 /* --disk-store-size; 0: the state fs's size */
	long long default_timeout_s;
	/* --default-isolation; 0: container. */
	enum runtime_isolation default_isolation;
	/* The VM backend's kernel and initramfs (NULL: Debian's newest
	 * /boot/vmlinuz-* and <build>/vm/initramfs.cpio.gz) and accelerator
	 * (--vm-accel tcg|kvm|auto, NULL: auto). */
	const char *vm_kernel, *vm_initrd, *vm_accel;
	int png_level; /* --png-level: screenshots' deflate level, 1-9 */
	long long userns_base;
	int allow_shared_uid;
	int stop_on_exit; /* --on-exit stop: SIGTERM stops the sandboxes */
	struct pool_size pool[POOL_MAX_SIZES];
	size_t n_pool;
	unsigned max_connections, max_per_address, header_timeout_s, max_pending;
	const char *tls_cert, *tls_key;
	/* The sandboxes' network (docs/network.md). */
	enum network_mode default_network;
	const char *sandbox_subnet, *uplink;
	const char *dns[NETWORK_MAX_DNS + 1];
	size_t n_dns;
	const char *ports_domain; /* --ports-domain: {port}-{id}.DOMAIN routing */
	const char *templates_dir;
	const char *egress_ca_file; /* --egress-ca-file (docs/secrets.md) */
	const char *egress_proxy;   /* --egress-proxy */
	/* Cluster mode (docs/cluster.md); cluster NULL: a single node. */
	const char *cluster;		 /* --cluster etcd://h:p,... */
	const char *node_name;		 /* --node-name */
	const char *advertise;		 /* --advertise http://host:port */
	const char *cluster_secret_file; /* --cluster-secret-file */
	int cluster_ttl_s;		 /* --cluster-ttl, default 4 */
};

/* Fills `o` with the defaults, then reads --config files and the command
 * line into it.  Prints usage or the problem to stderr: 0 to go on, 1 when
 * --help was printed, -1 on a bad option.  Strings point into argv or into
 * the config's text, kept until exit. */
int options_parse(int argc, char **argv, struct options *o);

#endif
