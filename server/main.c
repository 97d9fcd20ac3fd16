/* deskboxd: the desktop sandbox server.  Parses options, sets up the host
 * (private mount namespace, cgroups), opens the sandbox registry, serves the
 * REST API until SIGINT/SIGTERM, then leaves running sandboxes running for
 * the next deskboxd (or, with --on-exit stop, stops them; files stay). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fs.h"
#include "common/log.h"
#include "server/api/api.h"
#include "server/cluster/cluster.h"
#include "server/desktop/desktop.h"
#include "server/compat/compat.h"
#include "server/http/http.h"
#include "server/mcp/mcp.h"
#include "server/network/network.h"
#include "server/options/options.h"
#include "server/secrets/secrets.h"
#include "server/runtime/runtime.h"
#include "server/sandbox/sandbox.h"
#include "server/viewer/viewer.h"

/* The token from the options, the environment, STATE/token, or a new one
 * stored there.  *generated says whether to print it. */
static int load_token(const struct options *o, char *out, size_t size, int *printed, struct err *e)
{
	*printed = 0;
	const char *t = o->token ? o->token : getenv("DESKBOX_TOKEN");
	if (t && *t) {
		if (strlen(t) < 16 || strlen(t) >= size)
			return err_set(e, ERR_INVALID, EINVAL,
				       "token must be 16 to %zu characters long", size - 1);
		snprintf(out, size, "%s", t);
		return 0;
	}
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/token", o->state_dir);
	_cleanup_free_ char *text = NULL;
	size_t len;
	if (fs_read_file(path, 4096, &text, &len, e) == 0) {
		text[strcspn(text, "\r\n")] = '\0';
		if (strlen(text) >= 16 && strlen(text) < size) {
			snprintf(out, size, "%s", text);
			*printed = 1;
			return 0;
		}
	}
	err_clear(e);
	char fresh[65];
	if (fs_random_hex(fresh, 32, e) < 0)
		return err_code(e);
	char line[80];
	snprintf(line, sizeof(line), "%s\n", fresh);
	if (fs_write_atomic(path, line, strlen(line), 0600, e) < 0)
		return err_code(e);
	snprintf(out, size, "%s", fresh);
	*printed = 1;
	return 0;
}

/* deskbox-bridge and deskbox-init live next to deskboxd. */
static int sibling(const char *name, char *out, size_t size)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0)
		return -1;
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	snprintf(out, size, "%s/%s", self, name);
	return access(out, X_OK) == 0 ? 0 : -1;
}

/* The VM backend's parts (docs/isolation.md): the options' or, by
 * default, Debian's newest kernel and what `make vm` puts in <bin>/vm/. */
static void configure_vm(const struct options *o, const char *init_path)
{
	static char kernel[PATH_MAX], initrd[PATH_MAX], share[PATH_MAX];
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", init_path);
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	glob_t g;
	if (!o->vm_kernel && glob("/boot/vmlinuz-*", 0, NULL, &g) == 0) {
		snprintf(kernel, sizeof(kernel), "%s", g.gl_pathv[g.gl_pathc - 1]);
		globfree(&g);
	}
	snprintf(initrd, sizeof(initrd), "%s/vm/initramfs.cpio.gz", dir);
	snprintf(share, sizeof(share), "%s/vm/deskbox", dir);
	struct runtime_vm_opts vo = {
	    .qemu = "/usr/bin/qemu-system-x86_64",
	    .kernel = o->vm_kernel ? o->vm_kernel
		      : kernel[0]  ? kernel
				   : NULL,
	    .initrd = o->vm_initrd ? o->vm_initrd : initrd,
	    .share = share,
	    .accel = o->vm_accel,
	    .client = init_path,
	};
	runtime_vm_configure(&vo);
}

/* What deskboxd finds and sets up on the host before it starts serving. */
struct host {
	/* The helper binaries next to deskboxd. */
	char bridge[PATH_MAX], init[PATH_MAX], vnc[PATH_MAX], xtool[PATH_MAX];
	/* image/: the desktop parts for stored images; "" when not built. */
	char image_bin[PATH_MAX];
	char state[PATH_MAX]; /* the state directory's real path */
	enum runtime_cgroup_mode cgroup_mode;
	uint32_t userns_base; /* 0: no user namespaces */
	char token[256];
	int print_token;
	char token_hint[PATH_MAX + 64]; /* where the token is, for 401s */
	char cluster_secret[512];	/* --cluster-secret-file's first line */
};

/* The running server's parts; server_stop() stops them. */
struct server {
	struct network *net;
	struct secrets *secrets;
	struct egress *egress;
	struct sandboxes *sbx;
	struct api api;	      /* the HTTP handlers' context: its address is kept */
	struct compat compat; /* the compatibility front-ends' context, likewise */
	struct http_mount mounts[COMPAT_MAX_MOUNTS];
	struct http *http;
	/* api_routes and the compatibility front-ends' (server/compat/). */
	struct http_route *routes;
	size_t n_routes;
};

/* Checks that deskboxd runs as root, finds its helper binaries and creates
 * the state directory.  Prints what is wrong. */
static int find_host_paths(const struct options *o, struct host *h)
{
	if (geteuid() != 0) {
		fprintf(stderr, "deskboxd: must run as root (it creates containers, mounts and "
				"cgroups)\n");
		return -1;
	}
	if (sibling("deskbox-bridge", h->bridge, sizeof(h->bridge)) < 0 ||
	    sibling("deskbox-init", h->init, sizeof(h->init)) < 0 ||
	    sibling("deskbox-vnc", h->vnc, sizeof(h->vnc)) < 0 ||
	    sibling("deskbox-xtool", h->xtool, sizeof(h->xtool)) < 0) {
		fprintf(stderr, "deskboxd: deskbox-bridge, deskbox-init, deskbox-vnc and "
				"deskbox-xtool must sit next to deskboxd\n");
		return -1;
	}
	if (sibling("image/deskbox-init", h->image_bin, sizeof(h->image_bin)) == 0)
		*strrchr(h->image_bin, '/') = '\0';
	else
		h->image_bin[0] = '\0';
	struct err e = ERR_INIT;
	if (fs_mkdir_p(o->state_dir, 0700, &e) < 0 || !realpath(o->state_dir, h->state)) {
		fprintf(stderr, "deskboxd: state dir: %s\n", e.msg[0] ? e.msg : strerror(errno));
		return -1;
	}
	chmod(h->state, 0700);
	return 0;
}

/* The stop signals are taken synchronously by sigwait() in main(); they are
 * blocked before any thread exists so every thread inherits the mask. */
static void block_signals(sigset_t *sigs)
{
	sigemptyset(sigs);
	sigaddset(sigs, SIGINT);
	sigaddset(sigs, SIGTERM);
	sigaddset(sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* The host's mount namespace and cgroups, and the API token.  Prints what is
 * wrong. */
static int setup_host(const struct options *o, struct host *h)
{
	struct err e = ERR_INIT;
	if (runtime_host_setup(&h->cgroup_mode, &e) < 0) {
		fprintf(stderr, "deskboxd: host setup: %s\n", e.msg);
		return -1;
	}
	h->userns_base = (uint32_t)o->userns_base;
	if (runtime_userns_probe(&e) < 0) {
		if (!o->allow_shared_uid) {
			fprintf(stderr,
				"deskboxd: %s: sandboxes need a user namespace each; "
				"--allow-shared-uid runs them all as host uid %u instead\n",
				e.msg, IMAGE_USER_UID);
			return -1;
		}
		fprintf(stderr,
			"deskboxd: %s: --allow-shared-uid: every sandbox runs as host uid %u\n",
			e.msg, IMAGE_USER_UID);
		h->userns_base = 0;
		err_clear(&e);
	}
	/* With user namespaces the containers' roots pass through it to their
	 * own directories (sandboxes/<id> is theirs alone). */
	if (chmod(h->state, h->userns_base ? 0711 : 0700) < 0) {
		fprintf(stderr, "deskboxd: chmod '%s': %s\n", h->state, strerror(errno));
		return -1;
	}
	if (o->token)
		snprintf(h->token_hint, sizeof(h->token_hint),
			 "the one deskboxd was given (--token)");
	else if (getenv("DESKBOX_TOKEN") && *getenv("DESKBOX_TOKEN"))
		snprintf(h->token_hint, sizeof(h->token_hint), "deskboxd's own DESKBOX_TOKEN");
	else
		snprintf(h->token_hint, sizeof(h->token_hint), "in %s/token", o->state_dir);
	if (load_token(o, h->token, sizeof(h->token), &h->print_token, &e) < 0) {
		fprintf(stderr, "deskboxd: token: %s\n", e.msg);
		return -1;
	}
	return 0;
}

/* The secrets store and its egress proxy (docs/secrets.md). */
static int start_secrets(const struct options *o, struct host *h, struct server *s, struct err *e)
{
	if (secrets_open(&s->secrets, h->state, e) < 0)
		return err_wrap(e, "secrets");
	struct egress_config ec = {.ca_file = o->egress_ca_file, .proxy_url = o->egress_proxy};
	if (egress_open(&s->egress, s->secrets, &ec, e) < 0) {
		secrets_close(s->secrets);
		return err_wrap(e, "egress proxy");
	}
	return 0;
}

static void stop_secrets(struct server *s)
{
	egress_close(s->egress);
	secrets_close(s->secrets);
}

/* The sandbox registry and the viewer sessions, into the API's context. */
static int start_sandboxes(const struct options *o, struct host *h, struct server *s, struct err *e)
{
	struct network_config nc = {
	    .state_dir = h->state,
	    .subnet = o->sandbox_subnet,
	    .uplink = o->uplink,
	    .dns = o->dns,
	    .default_mode = o->default_network,
	};
	if (network_open(&s->net, &nc, e) < 0)
		return err_wrap(e, "network");
	if (start_secrets(o, h, s, e) < 0) {
		network_close(s->net);
		return err_code(e);
	}
	struct sandboxes_config sc = {
	    .network = s->net,
	    .secrets = s->secrets,
	    .egress = s->egress,
	    .state_dir = h->state,
	    .runtime_binary = o->runtime,
	    .bridge_path = h->bridge,
	    .init_path = h->init,
	    .vnc_path = h->vnc,
	    .xtool_path = h->xtool,
	    .image_bin_dir = h->image_bin[0] ? h->image_bin : NULL,
	    .cgroup_mode = h->cgroup_mode,
	    .max_sandboxes = o->max_sandboxes,
	    .ready_timeout_ms = 20000,
	    .disk_mb = (uint64_t)o->disk_quota_mb,
	    .disk_store = o->disk_store,
	    .disk_store_mb = (uint64_t)o->disk_store_mb,
	    .default_timeout_s = o->default_timeout_s,
	    .default_isolation = o->default_isolation,
	    .userns_base = h->userns_base,
	};
	if (sandboxes_open(&s->sbx, &sc, e) < 0) {
		network_close(s->net);
		stop_secrets(s);
		return err_code(e);
	}
	s->api = (struct api){
	    .sandboxes = s->sbx,
	    .exec_timeout_default_s = o->exec_timeout_default_s,
	    .exec_timeout_max_s = o->exec_timeout_max_s,
	    .exec_max_output = o->exec_max_output,
	    .png_level = o->png_level,
	    .ports_domain = o->ports_domain,
	    .max_sandboxes = o->max_sandboxes,
	    .secrets = s->secrets,
	};
	compat_init(&s->compat, s->sbx, o->exec_timeout_max_s, o->exec_max_output);
	s->compat.ports_domain = o->ports_domain;
	s->compat.api = &s->api;
	if (shares_new(&s->api.shares, e) < 0) {
		sandboxes_close(s->sbx);
		network_close(s->net);
		stop_secrets(s);
		return err_code(e);
	}
	if (vnc_new(&s->api.vnc, h->token, e) < 0) {
		shares_free(s->api.shares);
		sandboxes_close(s->sbx);
		network_close(s->net);
		stop_secrets(s);
		return err_code(e);
	}
	if (mcp_sessions_new(&s->api.mcp, e) < 0 || desk_observers_new(&s->api.observers, e) < 0 ||
	    sandbox_templates_open(&s->api.templates, h->state, o->templates_dir, e) < 0) {
		desk_observers_free(s->api.observers);
		mcp_sessions_free(s->api.mcp);
		vnc_free(s->api.vnc);
		shares_free(s->api.shares);
		sandboxes_close(s->sbx);
		network_close(s->net);
		stop_secrets(s);
		return err_code(e);
	}
	return 0;
}

/* Cluster mode (docs/cluster.md): the node joins through etcd. */
static int start_cluster(const struct options *o, struct host *h, struct server *s, struct err *e)
{
	if (!o->cluster)
		return 0;
	_cleanup_free_ char *text = NULL;
	size_t len;
	if (fs_read_file(o->cluster_secret_file, sizeof(h->cluster_secret) - 1, &text, &len, e) < 0)
		return err_wrap(e, "--cluster-secret-file");
	text[strcspn(text, "\r\n")] = '\0';
	snprintf(h->cluster_secret, sizeof(h->cluster_secret), "%s", text);
	struct cluster_config cc = {
	    .endpoints = o->cluster,
	    .name = o->node_name,
	    .advertise = o->advertise,
	    .secret = h->cluster_secret,
	    .ttl_s = o->cluster_ttl_s,
	    .max_sandboxes = o->max_sandboxes,
	    .capacity = api_cluster_capacity,
	    .local = api_cluster_local,
	    .cls = &s->api,
	};
	return cluster_open(&s->api.cluster, &cc, e);
}

/* The HTTP server on --listen, serving the API routes. */
static int start_http(const struct options *o, struct host *h, struct server *s, struct err *e)
{
	s->compat.token = h->token;
	s->routes = compat_routes_join(api_routes, api_n_routes, &s->n_routes);
	if (!s->routes)
		err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	struct http_opts ho = {
	    .listen = o->listen,
	    .token = h->token,
	    .token_hint = h->token_hint,
	    .routes = s->routes,
	    .n_routes = s->n_routes,
	    .app = &s->api,
	    .mounts = s->mounts,
	    .n_mounts = compat_mounts(&s->compat, s->mounts, COMPAT_MAX_MOUNTS),
	    .max_body = 2u << 20,
	    .max_connections = o->max_connections,
	    .max_per_address = o->max_per_address,
	    .idle_timeout_s = 120,
	    .header_timeout_s = o->header_timeout_s,
	    .max_waiting = o->max_pending,
	    .tls_cert_file = o->tls_cert,
	    .tls_key_file = o->tls_key,
	    .rewrite = o->ports_domain ? compat_ports_rewrite : NULL,
	    .canon = compat_canon_captures,
	    .error_body = compat_error_body,
	    .forward = s->api.cluster ? api_cluster_forward : NULL,
	    .peer_header = s->api.cluster ? CLUSTER_SECRET_HEADER : NULL,
	    .peer_secret = s->api.cluster ? h->cluster_secret : NULL,
	};
	if (!s->routes || http_new(&s->http, &ho, e) < 0) {
		free(s->routes);
		sandboxes_close(s->sbx);
		network_close(s->net);
		stop_secrets(s);
		vnc_free(s->api.vnc);
		shares_free(s->api.shares);
		mcp_sessions_free(s->api.mcp);
		return err_code(e);
	}
	return 0;
}

/* Starts the sandboxes, the HTTP server and the warm pool, and prints where
 * it listens.  Prints what is wrong. */
static int server_start(const struct options *o, struct host *h, struct server *s)
{
	struct err e = ERR_INIT;
	if (start_sandboxes(o, h, s, &e) < 0) {
		fprintf(stderr, "deskboxd: %s\n", e.msg);
		return -1;
	}
	if (start_cluster(o, h, s, &e) < 0 || start_http(o, h, s, &e) < 0) {
		fprintf(stderr, "deskboxd: %s\n", e.msg);
		cluster_close(s->api.cluster);
		return -1;
	}
	if (s->api.cluster)
		printf("deskboxd: node '%s' of the cluster at %s (lease %d s)\n", o->node_name,
		       o->cluster, o->cluster_ttl_s);
	char host[64];
	snprintf(host, sizeof(host), "%.*s", (int)strcspn(o->listen, ":"), o->listen);
	printf("deskboxd: cgroup v%d, state dir %s\n", h->cgroup_mode == RUNTIME_CGROUP_V2 ? 2 : 1,
	       h->state);
	if (h->userns_base)
		printf("deskboxd: user namespaces, uid ranges from %u\n", h->userns_base);
	else
		printf("deskboxd: no user namespaces, sandboxes share host uid %u\n",
		       IMAGE_USER_UID);
	if (h->print_token)
		printf("deskboxd: token %s\n", h->token);
	/* Always: templates may ask for warm pools at any time. */
	if (pool_new(&s->api.pool, s->sbx, s->api.templates, o->pool, o->n_pool, &e) < 0) {
		fprintf(stderr, "deskboxd: %s\n", e.msg);
		vnc_stop_all(s->api.vnc);
		http_free(s->http);
		free(s->routes);
		sandboxes_close(s->sbx);
		network_close(s->net);
		stop_secrets(s);
		vnc_free(s->api.vnc);
		shares_free(s->api.shares);
		mcp_sessions_free(s->api.mcp);
		return -1;
	}
	if (!http_loopback(s->http) && !http_tls(s->http))
		fprintf(stderr,
			"deskboxd: WARNING: listening on %s, which is not a loopback address, "
			"without TLS: the API token and all data cross the network in clear "
			"text; use --tls-cert and --tls-key, or listen on 127.0.0.1 behind a TLS "
			"proxy\n",
			host);
	printf("deskboxd: listening on %s://%s:%u\n", http_tls(s->http) ? "https" : "http", host,
	       http_port(s->http));
	return 0;
}

static void server_stop(struct server *s, int keep)
{
	/* The node leaves the cluster first: the others stop sending to it. */
	cluster_close(s->api.cluster);
	s->api.cluster = NULL;
	vnc_stop_all(s->api.vnc); /* viewer sessions hold connection threads */
	/* So do foreground and streamed runs; background ones go on in
	 * sandboxes left running. */
	sandboxes_kill_runs(s->sbx, keep);
	http_free(s->http);
	/* Recordings finish their files while their sandboxes still run. */
	desk_observers_free(s->api.observers);
	s->api.observers = NULL;
	free(s->routes);
	pool_free(s->api.pool);
	if (keep)
		sandboxes_detach(s->sbx);
	else
		sandboxes_close(s->sbx);
	network_close(s->net);
	stop_secrets(s); /* after every sandbox detached */
	vnc_free(s->api.vnc);
	shares_free(s->api.shares);
	mcp_sessions_free(s->api.mcp);
	sandbox_templates_free(s->api.templates);
}

int main(int argc, char **argv)
{
	struct options o;
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* DESKBOX_LOG=debug|info|warn|error: what the server's modules log. */
	log_configure(log_level_parse(getenv("DESKBOX_LOG"), LOG_LEVEL_INFO), NULL, NULL);
	/* Screenshots allocate a few MB per request (pixels, PNG).  Served
	 * from fresh mmaps, each page faults on first touch, which cost more
	 * than the encoding itself on a busy 1280x800 screen (measured with
	 * perf: ~45% of the time in faults and copies).  Keep such buffers in
	 * malloc's arenas for reuse instead. */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 128 << 20);
	/* Few arenas, so what is kept for reuse stays bounded (a thread per
	 * connection would otherwise spread it over 8 per core). */
	mallopt(M_ARENA_MAX, 4);
	int pr = options_parse(argc, argv, &o);
	if (pr != 0)
		return pr > 0 ? 0 : 2;
	struct host h;
	if (find_host_paths(&o, &h) < 0)
		return 1;
	configure_vm(&o, h.init);
	sigset_t sigs;
	block_signals(&sigs);
	if (setup_host(&o, &h) < 0)
		return 1;
	struct server srv;
	if (server_start(&o, &h, &srv) < 0)
		return 1;
	int sig = 0;
	sigwait(&sigs, &sig);
	printf("deskboxd: signal %d, stopping\n", sig);
	server_stop(&srv, !o.stop_on_exit);
	return 0;
}
