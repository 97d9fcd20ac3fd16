/* options: see options.h. */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/fs.h"
#include "common/log.h"

/* The long options without a short letter. */
enum {
	OPT_CLUSTER = 1000,
	OPT_NODE_NAME,
	OPT_ADVERTISE,
	OPT_CLUSTER_SECRET,
	OPT_CLUSTER_TTL,
};

/* deskboxd --help. */
static const char usage_text[] =
    "usage: deskboxd [--listen ADDR:PORT] [--state-dir DIR] [--token TOKEN]\n"
    "                [--runtime crun] [--max-sandboxes N]\n"
    "                [--exec-timeout S] [--exec-timeout-max S] [--exec-max-output BYTES]\n"
    "                [--disk-quota-mb MB] [--warm-pool N[:WxH]]...\n"
    "                [--disk-store auto|pool|direct] [--disk-store-size MB]\n"
    "                [--default-timeout S] [--templates-dir DIR] [--png-level N]\n"
    "                [--tls-cert FILE --tls-key FILE] [--max-connections N]\n"
    "                [--max-connections-per-address N] [--header-timeout S]\n"
    "                [--max-pending-headers N] [--config FILE]\n"
    "                [--log-format text|json] [--log-level LEVEL]\n"
    "                [--userns-base ID] [--allow-shared-uid]\n"
    "                [--default-network none|internet] [--sandbox-subnet CIDR]\n"
    "                [--uplink IFACE] [--dns-server IP]...\n"
    "                [--default-isolation container|vm]\n"
    "                [--cluster etcd://HOST:PORT,... --node-name N --advertise URL\n"
    "                 --cluster-secret-file FILE [--cluster-ttl S]]\n"
    "                [--vm-kernel FILE] [--vm-initrd FILE] [--vm-accel tcg|kvm|auto]\n"
    "\n"
    "  --listen           address to serve the API on (default 127.0.0.1:8080;\n"
    "                     port 0 picks a free port, printed at start)\n"
    "  --state-dir        where sandboxes and their files live (default /var/lib/deskbox)\n"
    "  --token            API bearer token (also DESKBOX_TOKEN); without one, a token\n"
    "                     is generated once, kept in STATE/token and printed\n"
    "  --runtime          OCI runtime binary (default crun)\n"
    "  --max-sandboxes    most sandboxes at once (default 32)\n"
    "  --exec-timeout     default process timeout in seconds (default 60)\n"
    "  --exec-timeout-max largest process timeout allowed (default 3600)\n"
    "  --exec-max-output  stdout/stderr cap per stream in bytes (default 1048576)\n"
    "  --disk-quota-mb    each sandbox's own disk in MiB, everything it writes,\n"
    "                     when its spec has no disk_mb (default 10240, at least\n"
    "                     32; 0: no disk of its own, no limit)\n"
    "  --disk-store       where disk images and checkpoints live: pool, an XFS\n"
    "                     with reflinks in STATE/store.xfs, so checkpoints and\n"
    "                     forks cost the same whatever the sandbox holds; direct,\n"
    "                     the sandboxes' own directories; auto (default): pool\n"
    "                     unless the state dir's filesystem has reflinks itself\n"
    "  --disk-store-size  size in MiB of the pool when it is made (sparse; default\n"
    "                     the state dir's filesystem's size, at least 300)\n"
    "  --default-timeout  seconds a sandbox lives when its create names no\n"
    "                     timeout_s, then its on_timeout happens (default 0: none)\n"
    "  --default-isolation  a sandbox's isolation when its create names none:\n"
    "                     container (default, crun) or vm (KVM; docs/isolation.md)\n"
    "  --templates-dir    load sandbox templates from DIR/*.json at start\n"
    "                     (docs/lifecycle.md)\n"
    "  --png-level        screenshots' PNG deflate level, 1-9 (default 1: deskbox's\n"
    "                     one-pass deflate, fastest; 6-9: zlib, ~1.3x smaller files)\n"
    "  --warm-pool        keep N ready desktops of size WxH (default 1280x800) for\n"
    "                     instant creates; repeat for more sizes\n"
    "\n"
    "Serving the API (see docs/api.md, \"Connections\"):\n"
    "  --tls-cert, --tls-key  serve HTTPS with this PEM certificate (chain) and\n"
    "                     key; without them on a non-loopback address the token\n"
    "                     crosses the network in clear text (a warning says so)\n"
    "  --ports-domain D   also route Host {port}-{id}.D to that sandbox port\n"
    "  --max-connections  open connections at most (default 512)\n"
    "  --max-connections-per-address  from one client IP address (default 64;\n"
    "                     0: no cap); raise it for one client driving many\n"
    "                     sandboxes with streams and viewers at once\n"
    "  --header-timeout   seconds a client has to send a whole request header,\n"
    "                     however steadily its bytes come (default 10; also the\n"
    "                     longest a kept-alive connection may idle)\n"
    "  --max-pending-headers  connections waiting for their header at most\n"
    "                     (default 128, below --max-connections): a new one\n"
    "                     closes the one waiting longest\n"
    "\n"
    "Operating it:\n"
    "  --config FILE      read options from FILE first, one per line as\n"
    "                     \"name value\" or \"name = value\" (names without the\n"
    "                     dashes, # starts a comment); the command line wins\n"
    "  --log-format       text (default) or json: one JSON object per line with\n"
    "                     ts, level, msg and the request's X-Request-Id\n"
    "  --log-level        debug, info (default), warn or error; debug adds a line\n"
    "                     per request (also DESKBOX_LOG)\n"
    "\n"
    "Isolation:\n"
    "  --userns-base      first host uid/gid of the sandboxes' user namespaces\n"
    "                     (default 1048576 = 2^20): sandbox k gets host ids\n"
    "                     ID + k*65536 .. + 65535, its root ID + k*65536 and its\n"
    "                     user (uid 1000 inside) that + 1000; nothing else on the\n"
    "                     host may use these ids\n"
    "  --allow-shared-uid run sandboxes without user namespaces when the kernel\n"
    "                     refuses them: all as host uid 1000, init included\n"
    "  --on-exit keep|stop  on SIGTERM/SIGINT leave running sandboxes running for\n"
    "                     the next deskboxd to take over (keep, the default), or\n"
    "                     stop them (their files stay)\n"
    "\n"
    "Network (docs/network.md):\n"
    "  --default-network  a sandbox's network when its spec names none: none\n"
    "                     (default: only lo) or internet\n"
    "  --sandbox-subnet   IPv4 network the sandboxes' addresses come from, a /30\n"
    "                     each (default 10.231.0.0/16)\n"
    "  --uplink           interface the sandboxes' traffic leaves by, NATed\n"
    "                     (default: the default route's)\n"
    "  --dns-server       upstream DNS server of the sandboxes' resolvers; repeat\n"
    "                     for more (default: the nameservers of /etc/resolv.conf)\n"
    "  --egress-ca-file F PEM CAs trusted for the real hosts of secrets, besides\n"
    "                     the system's (docs/secrets.md)\n"
    "  --egress-proxy URL every sandbox's TCP through this HTTP proxy (CONNECT),\n"
    "                     http://[user:password@]host:port\n"
    "\n"
    "Cluster (docs/cluster.md; without --cluster: one node, no etcd):\n"
    "  --cluster URLS     etcd members, etcd://host:port,host:port,...\n"
    "  --node-name N      this node's name in the cluster (a-z 0-9 -)\n"
    "  --advertise URL    http://host:port the other nodes reach this one at\n"
    "  --cluster-secret-file FILE  the secret node-to-node calls carry (the same\n"
    "                     file on every node, 16 characters at least)\n"
    "  --cluster-ttl S    seconds of the node's lease: a node silent this long is\n"
    "                     lost (default 4, 2-60)\n";

static void usage(FILE *f)
{
	fputs(usage_text, f);
}

static int parse_uint(const char *s, long long min, long long max, long long *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || *end || end == s || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

/* The value of a numeric connection option `c`, range checked. */
static int parse_connection_option(int c, const char *arg, struct options *o)
{
	long long v;
	switch (c) {
	case 'C':
		if (parse_uint(arg, 2, 100000, &v) < 0)
			return -1;
		o->max_connections = (unsigned)v;
		return 0;
	case 'P':
		if (parse_uint(arg, 0, 100000, &v) < 0)
			return -1;
		o->max_per_address = (unsigned)v;
		return 0;
	case 'H':
		if (parse_uint(arg, 1, 3600, &v) < 0)
			return -1;
		o->header_timeout_s = (unsigned)v;
		return 0;
	case 'N':
		if (parse_uint(arg, 1, 100000, &v) < 0)
			return -1;
		o->max_pending = (unsigned)v;
		return 0;
	}
	return -1;
}

/* The value of a numeric option `c`, range checked. */
static int parse_number_option(int c, const char *arg, struct options *o)
{
	long long v;
	switch (c) {
	case 'm':
		if (parse_uint(arg, 1, 4096, &v) < 0)
			return -1;
		o->max_sandboxes = (unsigned)v;
		return 0;
	case 'T':
		if (parse_uint(arg, 1, 86400, &v) < 0)
			return -1;
		o->exec_timeout_default_s = (int)v;
		return 0;
	case 'M':
		if (parse_uint(arg, 1, 86400, &v) < 0)
			return -1;
		o->exec_timeout_max_s = (int)v;
		return 0;
	case 'O':
		if (parse_uint(arg, 1024, 1LL << 30, &v) < 0)
			return -1;
		o->exec_max_output = (size_t)v;
		return 0;
	case 'Q':
		if (parse_uint(arg, 0, 1LL << 24, &v) < 0 || (v > 0 && v < SANDBOX_DISK_MIN_MB))
			return -1;
		o->disk_quota_mb = v;
		return 0;
	case 'Z':
		if (parse_uint(arg, 300, 1LL << 40, &v) < 0)
			return -1;
		o->disk_store_mb = v;
		return 0;
	case 'D':
		if (parse_uint(arg, 0, SANDBOX_TIMEOUT_MAX, &v) < 0)
			return -1;
		o->default_timeout_s = v;
		return 0;
	case 'G':
		if (parse_uint(arg, 1, 9, &v) < 0)
			return -1;
		o->png_level = (int)v;
		return 0;
	case OPT_CLUSTER_TTL:
		if (parse_uint(arg, 2, 60, &v) < 0)
			return -1;
		o->cluster_ttl_s = (int)v;
		return 0;
	case 'U':
		/* Above the ids of real users, room for one range at least. */
		if (parse_uint(arg, RUNTIME_USERNS_SIZE,
			       UINT32_MAX - 2 * (long long)RUNTIME_USERNS_SIZE, &v) < 0)
			return -1;
		o->userns_base = v;
		return 0;
	}
	return parse_connection_option(c, arg, o);
}

/* Sets string option `c`; 0 when `c` is not one. */
static int set_string_option(int c, const char *arg, struct options *o)
{
	switch (c) {
	case 'l':
		o->listen = arg;
		return 1;
	case '1':
		o->vm_kernel = arg;
		return 1;
	case '2':
		o->vm_initrd = arg;
		return 1;
	case 's':
		o->state_dir = arg;
		return 1;
	case 't':
		o->token = arg;
		return 1;
	case 'r':
		o->runtime = arg;
		return 1;
	case 'c':
		o->tls_cert = arg;
		return 1;
	case 'k':
		o->tls_key = arg;
		return 1;
	case 'p':
		o->ports_domain = arg;
		return 1;
	case 'b':
		o->sandbox_subnet = arg;
		return 1;
	case 'u':
		o->uplink = arg;
		return 1;
	case 'Y':
		o->templates_dir = arg;
		return 1;
	case 'A':
		o->egress_ca_file = arg;
		return 1;
	case 'E':
		o->egress_proxy = arg;
		return 1;
	case OPT_CLUSTER:
		o->cluster = arg;
		return 1;
	case OPT_NODE_NAME:
		o->node_name = arg;
		return 1;
	case OPT_ADVERTISE:
		o->advertise = arg;
		return 1;
	case OPT_CLUSTER_SECRET:
		o->cluster_secret_file = arg;
		return 1;
	}
	return 0;
}

/* --default-network and --dns-server (repeated); -1 on a bad value. */
static int set_network_option(int c, const char *arg, struct options *o)
{
	if (c == 'd') {
		if (o->n_dns >= NETWORK_MAX_DNS)
			return -1;
		o->dns[o->n_dns++] = arg;
		return 0;
	}
	if (strcmp(arg, "none") && strcmp(arg, "internet"))
		return -1;
	o->default_network = strcmp(arg, "none") ? NETWORK_INTERNET : NETWORK_NONE;
	return 0;
}

/* --on-exit keep|stop, --disk-store auto|pool|direct and
 * --default-isolation container|vm; -1 for anything else. */
static int parse_word_option(int c, const char *arg, struct options *o)
{
	if (c == 'I')
		return runtime_isolation_parse(arg, &o->default_isolation) < 0 ? -1 : 0;
	if (c == '3') {
		if (strcmp(arg, "tcg") && strcmp(arg, "kvm") && strcmp(arg, "auto"))
			return -1;
		o->vm_accel = arg;
		return 0;
	}
	if (c == 'K') {
		static const char *const modes[] = {
		    [DISK_STORE_AUTO] = "auto",
		    [DISK_STORE_POOL] = "pool",
		    [DISK_STORE_DIRECT] = "direct",
		};
		for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
			if (strcmp(arg, modes[i]) == 0) {
				o->disk_store = (enum disk_store_mode)i;
				return 0;
			}
		return -1;
	}
	if (strcmp(arg, "stop") && strcmp(arg, "keep"))
		return -1;
	o->stop_on_exit = strcmp(arg, "stop") == 0;
	return 0;
}

static int add_pool_size(struct options *o, const char *arg)
{
	struct err pe = ERR_INIT;
	if (o->n_pool >= POOL_MAX_SIZES || pool_size_parse(arg, &o->pool[o->n_pool], &pe) < 0) {
		fprintf(stderr, "deskboxd: --warm-pool: %s\n",
			pe.msg[0] ? pe.msg : "too many sizes");
		return -1;
	}
	o->n_pool++;
	return 0;
}

/* What the options mean together.  Prints what is wrong. */
static int check_options(const struct options *o)
{
	if (!o->tls_cert != !o->tls_key) {
		fprintf(stderr, "deskboxd: --tls-cert and --tls-key go together\n");
		return -1;
	}
	/* Connections waiting for a header must leave slots for the ones being
	 * served, or slow clients could still fill every slot. */
	if (o->max_pending >= o->max_connections) {
		fprintf(stderr,
			"deskboxd: --max-pending-headers (%u) must be below --max-connections "
			"(%u)\n",
			o->max_pending, o->max_connections);
		return -1;
	}
	if (o->cluster && (!o->node_name || !o->advertise || !o->cluster_secret_file)) {
		fprintf(stderr, "deskboxd: --cluster needs --node-name, --advertise and "
				"--cluster-secret-file\n");
		return -1;
	}
	return 0;
}

/* The options in a --config file: each line "name value" or "name =
 * value" becomes "--name=value", appended to *args (*n of them). */
static int read_config(const char *path, char ***args, int *n)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		fprintf(stderr, "deskboxd: --config '%s': %s\n", path, strerror(errno));
		return -1;
	}
	char line[4096];
	int r = 0;
	for (unsigned no = 1; r == 0 && fgets(line, sizeof(line), f); no++) {
		line[strcspn(line, "#\r\n")] = '\0';
		char *name = line + strspn(line, " \t");
		if (!*name)
			continue;
		char *end = name + strcspn(name, " \t=");
		char *val = end + strspn(end, " \t");
		if (*val == '=')
			val += 1 + strspn(val + 1, " \t");
		*end = '\0';
		size_t vl = strlen(val);
		while (vl && (val[vl - 1] == ' ' || val[vl - 1] == '\t'))
			val[--vl] = '\0';
		char **grown = realloc(*args, sizeof(char *) * (size_t)(*n + 2));
		char *arg = NULL;
		if (!grown || asprintf(&arg, vl ? "--%s=%s" : "--%s", name, val) < 0) {
			if (grown)
				*args = grown;
			fprintf(stderr, "deskboxd: out of memory reading '%s'\n", path);
			r = -1;
			break;
		}
		*args = grown;
		(*args)[(*n)++] = arg;
		(*args)[*n] = NULL;
		if (strcmp(name, "config") == 0) {
			fprintf(stderr, "deskboxd: %s:%u: a config file cannot name another\n",
				path, no);
			r = -1;
		}
	}
	fclose(f);
	return r;
}

/* The vector expand_config() made: reachable from here until exit, which
 * is when it may go (the options point into it). */
static char **config_argv;

/* argv with the --config file's options put before the command line's, so
 * those win.  The new vector and its strings live until exit. */
static int expand_config(int *argc, char ***argv)
{
	const char *path = NULL;
	for (int i = 1; i < *argc; i++) {
		if (strcmp((*argv)[i], "--config") == 0 && i + 1 < *argc)
			path = (*argv)[i + 1];
		else if (strncmp((*argv)[i], "--config=", 9) == 0)
			path = (*argv)[i] + 9;
	}
	if (!path)
		return 0;
	char **args = calloc(2, sizeof(char *));
	int n = 1;
	if (!args)
		return -1;
	args[0] = (*argv)[0];
	config_argv = args;
	int r = read_config(path, &config_argv, &n);
	args = config_argv;
	if (r < 0)
		return -1;
	for (int i = 1; i < *argc; i++) {
		char **grown = realloc(args, sizeof(char *) * (size_t)(n + 2));
		if (!grown)
			return -1;
		args = config_argv = grown;
		args[n++] = (*argv)[i];
		args[n] = NULL;
	}
	*argc = n;
	*argv = args;
	return 0;
}

/* Every option; --config files take the same names (expand_config). */
static const struct option longopts[] = {
    {"listen", required_argument, NULL, 'l'},
    {"state-dir", required_argument, NULL, 's'},
    {"token", required_argument, NULL, 't'},
    {"runtime", required_argument, NULL, 'r'},
    {"max-sandboxes", required_argument, NULL, 'm'},
    {"warm-pool", required_argument, NULL, 'W'},
    {"exec-timeout", required_argument, NULL, 'T'},
    {"exec-timeout-max", required_argument, NULL, 'M'},
    {"exec-max-output", required_argument, NULL, 'O'},
    {"disk-quota-mb", required_argument, NULL, 'Q'},
    {"default-timeout", required_argument, NULL, 'D'},
    {"png-level", required_argument, NULL, 'G'},
    {"disk-store", required_argument, NULL, 'K'},
    {"disk-store-size", required_argument, NULL, 'Z'},
    {"templates-dir", required_argument, NULL, 'Y'},
    {"max-connections", required_argument, NULL, 'C'},
    {"max-connections-per-address", required_argument, NULL, 'P'},
    {"header-timeout", required_argument, NULL, 'H'},
    {"max-pending-headers", required_argument, NULL, 'N'},
    {"tls-cert", required_argument, NULL, 'c'},
    {"tls-key", required_argument, NULL, 'k'},
    {"ports-domain", required_argument, NULL, 'p'},
    {"config", required_argument, NULL, 'F'},
    {"log-format", required_argument, NULL, 'f'},
    {"log-level", required_argument, NULL, 'v'},
    {"userns-base", required_argument, NULL, 'U'},
    {"allow-shared-uid", no_argument, NULL, 'S'},
    {"on-exit", required_argument, NULL, 'X'},
    {"default-network", required_argument, NULL, 'n'},
    {"sandbox-subnet", required_argument, NULL, 'b'},
    {"uplink", required_argument, NULL, 'u'},
    {"dns-server", required_argument, NULL, 'd'},
    {"egress-ca-file", required_argument, NULL, 'A'},
    {"egress-proxy", required_argument, NULL, 'E'},
    {"default-isolation", required_argument, NULL, 'I'},
    {"cluster", required_argument, NULL, OPT_CLUSTER},
    {"node-name", required_argument, NULL, OPT_NODE_NAME},
    {"advertise", required_argument, NULL, OPT_ADVERTISE},
    {"cluster-secret-file", required_argument, NULL, OPT_CLUSTER_SECRET},
    {"cluster-ttl", required_argument, NULL, OPT_CLUSTER_TTL},
    {"vm-kernel", required_argument, NULL, '1'},
    {"vm-initrd", required_argument, NULL, '2'},
    {"vm-accel", required_argument, NULL, '3'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* The long name of option `c`. */
static const char *option_name(int c)
{
	for (const struct option *o = longopts; o->name; o++)
		if (o->val == c)
			return o->name;
	return "?";
}

/* --log-format and --log-level; -1 for a bad value. */
static int parse_log_option(int c, const char *arg)
{
	if (c == 'f') {
		enum log_format f;
		if (log_format_parse(arg, &f) < 0)
			return -1;
		log_set_format(f);
		return 0;
	}
	if (log_level_parse(arg, (enum log_level) - 1) == (enum log_level) - 1)
		return -1;
	log_configure(log_level_parse(arg, LOG_LEVEL_INFO), NULL, NULL);
	return 0;
}

static int parse_options(int argc, char **argv, struct options *o)
{
	int c;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'S':
			o->allow_shared_uid = 1;
			break;
		case 'W':
			if (add_pool_size(o, optarg) < 0)
				return -1;
			break;
		case 'F': /* read before the command line: expand_config() */
			break;
		case 'n':
		case 'd':
			if (set_network_option(c, optarg, o) < 0)
				goto bad;
			break;
		case 'f':
		case 'v':
			if (parse_log_option(c, optarg) < 0)
				goto bad;
			break;
		case 'h':
			usage(stdout);
			return 1;
		case '?':
			usage(stderr);
			return -1;
		default:
			if (set_string_option(c, optarg, o))
				break;
			if (c == 'X' || c == 'K' || c == 'I' || c == '3') {
				if (parse_word_option(c, optarg, o) < 0)
					goto bad;
				break;
			}
			if (parse_number_option(c, optarg, o) < 0)
				goto bad;
			break;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return -1;
	}
	if (o->exec_timeout_default_s > o->exec_timeout_max_s)
		o->exec_timeout_default_s = o->exec_timeout_max_s;
	return check_options(o);
bad:
	fprintf(stderr, "deskboxd: --%s: bad value '%s'\n", option_name(c), optarg);
	return -1;
}

int options_parse(int argc, char **argv, struct options *o)
{
	*o = (struct options){
	    .listen = "127.0.0.1:8080",
	    .state_dir = "/var/lib/deskbox",
	    .runtime = "crun",
	    .max_sandboxes = 32,
	    .exec_timeout_default_s = 60,
	    .png_level = 1,
	    .exec_timeout_max_s = 3600,
	    .exec_max_output = 1 << 20,
	    .disk_quota_mb = 10240,
	    .max_connections = 512,
	    .max_per_address = 64,
	    .header_timeout_s = 10,
	    .max_pending = 128,
	    .userns_base = 1 << 20,
	    .cluster_ttl_s = 4,
	};
	if (expand_config(&argc, &argv) < 0)
		return -1;
	return parse_options(argc, argv, o);
}
