/* deskboxd: the desktop sandbox server.  Parses options, sets up the host
 * (private mount namespace, cgroups), opens the sandbox registry, serves the
 * REST API until SIGINT/SIGTERM, then stops every sandbox (files stay). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
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
#include "server/http/http.h"
#include "server/mcp/mcp.h"
#include "server/runtime/runtime.h"
#include "server/sandbox/sandbox.h"
#include "server/viewer/viewer.h"

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
	long long userns_base;
	int allow_shared_uid;
	struct pool_size pool[POOL_MAX_SIZES];
	size_t n_pool;
	unsigned max_connections, max_per_address, header_timeout_s, max_pending;
	const char *tls_cert, *tls_key;
	const char *ports_domain; /* --ports-domain: {port}-{id}.DOMAIN routing */
};

static void usage(FILE *f)
{
	fputs(
	    "usage: deskboxd [--listen ADDR:PORT] [--state-dir DIR] [--token TOKEN]\n"
	    "                [--runtime crun] [--max-sandboxes N]\n"
	    "                [--exec-timeout S] [--exec-timeout-max S] [--exec-max-output BYTES]\n"
	    "                [--disk-quota-mb MB] [--warm-pool N[:WxH]]...\n"
	    "                [--tls-cert FILE --tls-key FILE] [--max-connections N]\n"
	    "                [--max-connections-per-address N] [--header-timeout S]\n"
	    "                [--max-pending-headers N] [--config FILE]\n"
	    "                [--log-format text|json] [--log-level LEVEL]\n"
	    "                [--userns-base ID] [--allow-shared-uid]\n"
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
	    "                     refuses them: all as host uid 1000, init included\n",
	    f);
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
	case 'D':
		o->ports_domain = arg;
		return 1;
	}
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

static int parse_options(int argc, char **argv, struct options *o)
{
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
	    {"max-connections", required_argument, NULL, 'C'},
	    {"max-connections-per-address", required_argument, NULL, 'P'},
	    {"header-timeout", required_argument, NULL, 'H'},
	    {"max-pending-headers", required_argument, NULL, 'N'},
	    {"tls-cert", required_argument, NULL, 'c'},
	    {"tls-key", required_argument, NULL, 'k'},
	    {"ports-domain", required_argument, NULL, 'D'},
	    {"config", required_argument, NULL, 'F'},
	    {"log-format", required_argument, NULL, 'f'},
	    {"log-level", required_argument, NULL, 'v'},
	    {"userns-base", required_argument, NULL, 'U'},
	    {"allow-shared-uid", no_argument, NULL, 'S'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
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
		case 'f': {
			enum log_format f;
			if (log_format_parse(optarg, &f) < 0)
				goto bad;
			log_set_format(f);
			break;
		}
		case 'v':
			if (log_level_parse(optarg, (enum log_level) - 1) == (enum log_level) - 1)
				goto bad;
			log_configure(log_level_parse(optarg, LOG_LEVEL_INFO), NULL, NULL);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case '?':
			usage(stderr);
			return -1;
		default:
			if (set_string_option(c, optarg, o))
				break;
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
	fprintf(stderr, "deskboxd: bad option value '%s'\n", optarg);
	return -1;
}

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
};

/* The running server's parts; server_stop() stops them. */
struct server {
	struct sandboxes *sbx;
	struct api api; /* the HTTP handlers' context: its address is kept */
	struct http *http;
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
	if (load_token(o, h->token, sizeof(h->token), &h->print_token, &e) < 0) {
		fprintf(stderr, "deskboxd: token: %s\n", e.msg);
		return -1;
	}
	return 0;
}

/* The sandbox registry and the viewer sessions, into the API's context. */
static int start_sandboxes(const struct options *o, struct host *h, struct server *s, struct err *e)
{
	struct sandboxes_config sc = {
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
	    .userns_base = h->userns_base,
	};
	if (sandboxes_open(&s->sbx, &sc, e) < 0)
		return err_code(e);
	s->api = (struct api){
	    .sandboxes = s->sbx,
	    .exec_timeout_default_s = o->exec_timeout_default_s,
	    .exec_timeout_max_s = o->exec_timeout_max_s,
	    .exec_max_output = o->exec_max_output,
	    .png_level = 1,
	    .ports_domain = o->ports_domain,
	};
	if (shares_new(&s->api.shares, e) < 0) {
		sandboxes_close(s->sbx);
		return err_code(e);
	}
	if (vnc_new(&s->api.vnc, h->token, e) < 0) {
		shares_free(s->api.shares);
		sandboxes_close(s->sbx);
		return err_code(e);
	}
	if (mcp_sessions_new(&s->api.mcp, e) < 0) {
		vnc_free(s->api.vnc);
		shares_free(s->api.shares);
		sandboxes_close(s->sbx);
		return err_code(e);
	}
	return 0;
}

/* The HTTP server on --listen, serving the API routes. */
static int start_http(const struct options *o, struct host *h, struct server *s, struct err *e)
{
	struct http_opts ho = {
	    .listen = o->listen,
	    .token = h->token,
	    .routes = api_routes,
	    .n_routes = api_n_routes,
	    .app = &s->api,
	    .max_body = 2u << 20,
	    .max_connections = o->max_connections,
	    .max_per_address = o->max_per_address,
	    .idle_timeout_s = 120,
	    .header_timeout_s = o->header_timeout_s,
	    .max_waiting = o->max_pending,
	    .tls_cert_file = o->tls_cert,
	    .tls_key_file = o->tls_key,
	    .rewrite = o->ports_domain ? api_ports_rewrite : NULL,
	};
	if (http_new(&s->http, &ho, e) < 0) {
		sandboxes_close(s->sbx);
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
	if (start_sandboxes(o, h, s, &e) < 0 || start_http(o, h, s, &e) < 0) {
		fprintf(stderr, "deskboxd: %s\n", e.msg);
		return -1;
	}
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
	if (o->n_pool && pool_new(&s->api.pool, s->sbx, o->pool, o->n_pool, &e) < 0) {
		fprintf(stderr, "deskboxd: %s\n", e.msg);
		vnc_stop_all(s->api.vnc);
		http_free(s->http);
		sandboxes_close(s->sbx);
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

static void server_stop(struct server *s)
{
	vnc_stop_all(s->api.vnc);    /* viewer sessions hold connection threads */
	sandboxes_kill_runs(s->sbx); /* so do foreground and streamed runs */
	http_free(s->http);
	pool_free(s->api.pool);
	sandboxes_close(s->sbx);
	vnc_free(s->api.vnc);
	shares_free(s->api.shares);
	mcp_sessions_free(s->api.mcp);
}

int main(int argc, char **argv)
{
	struct options o = {
	    .listen = "127.0.0.1:8080",
	    .state_dir = "/var/lib/deskbox",
	    .runtime = "crun",
	    .max_sandboxes = 32,
	    .exec_timeout_default_s = 60,
	    .exec_timeout_max_s = 3600,
	    .exec_max_output = 1 << 20,
	    .disk_quota_mb = 10240,
	    .max_connections = 512,
	    .max_per_address = 64,
	    .header_timeout_s = 10,
	    .max_pending = 128,
	    .userns_base = 1 << 20,
	};
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
	if (expand_config(&argc, &argv) < 0 || parse_options(argc, argv, &o) < 0)
		return 2;
	struct host h;
	if (find_host_paths(&o, &h) < 0)
		return 1;
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
	server_stop(&srv);
	return 0;
}
