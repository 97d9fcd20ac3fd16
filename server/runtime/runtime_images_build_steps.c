/* images_build_steps: the steps of a Dockerfile build (see
 * runtime_images_build.c for how it is isolated): FROM's tree, the
 * context, each instruction, the manifest, and the build's thread. */
#include "common/clock.h"
#include "runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <nettle/sha2.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fs.h"
#include "common/log.h"
#include "internal.h"

#define BUILD_MEMORY_BYTES (2ULL << 30)
#define BUILD_PIDS_MAX	   4096

/* COPY and ADD inside the build container: $1 the destination (absolute),
 * $2 a chown value or "", $3 a chmod value or "", $4 "add" to unpack local
 * tar archives, then the sources (patterns, relative to the context).  As
 * Docker: a directory's contents are copied, not the directory; with
 * several sources, or a destination ending in '/' or being a directory,
 * files go into it under their own names. */
static const char copy_script[] =
    "set -e\n"
    "dest=$1; own=$2; mode=$3; add=$4; shift 4\n"
    "todir=0\n"
    "case $dest in */) todir=1;; esac\n"
    "[ $# -gt 1 ] && todir=1\n"
    "[ -d \"$dest\" ] && todir=1\n"
    "fix() { [ -z \"$own\" ] || chown -Rh \"$own\" \"$1\"; [ -z \"$mode\" ] || chmod \"$mode\" "
    "\"$1\"; }\n"
    "cd /.deskbox/context\n"
    "IFS='\n'\n"
    "for pat in \"$@\"; do\n"
    "  found=0\n"
    "  for src in $pat; do\n"
    "    [ -e \"$src\" ] || [ -L \"$src\" ] || continue\n"
    "    found=1\n"
    "    if [ -d \"$src\" ] && [ ! -L \"$src\" ]; then\n"
    "      mkdir -p \"$dest\"\n"
    "      cp -a \"$src/.\" \"$dest/\"\n"
    "      for x in \"$src\"/* \"$src\"/.[!.]* \"$src\"/..?*; do\n"
    "        [ -e \"$x\" ] || [ -L \"$x\" ] || continue; fix \"$dest/${x##*/}\"; done\n"
    "      continue\n"
    "    fi\n"
    "    if [ \"$add\" = add ] && [ -f \"$src\" ]; then\n"
    "      case $src in *.tar|*.tar.gz|*.tgz|*.tar.bz2|*.tar.xz)\n"
    "        mkdir -p \"$dest\"; tar -xf \"$src\" -C \"$dest\"; continue;; esac\n"
    "    fi\n"
    "    if [ $todir = 1 ]; then mkdir -p \"$dest\"; t=\"${dest%/}/${src##*/}\";\n"
    "    else mkdir -p \"$(dirname \"$dest\")\"; t=$dest; fi\n"
    "    cp -a \"$src\" \"$t\"; fix \"$t\"\n"
    "  done\n"
    "  [ $found = 1 ] || { echo \"no file of the build context matches '$pat'\" >&2; exit 1; }\n"
    "done\n";

/* What a build's root holds in its own user namespace: Docker's default
 * capabilities (what apt, dpkg and pip need), none over the host. */
static const char *const build_caps[] = {
    "CAP_CHOWN",       "CAP_DAC_OVERRIDE", "CAP_FOWNER",  "CAP_FSETID",		  "CAP_KILL",
    "CAP_SETGID",      "CAP_SETUID",	   "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT",
    "CAP_AUDIT_WRITE", "CAP_SETFCAP",	   NULL,
};

/* The builds under way, for image_builds_cancel(); with their lock. */
static pthread_mutex_t active_mu = PTHREAD_MUTEX_INITIALIZER;
static struct build *active[IMAGE_BUILDS_MAX];

/* Names the container about to run (`id`), or none (NULL); fails once
 * the build is cancelled. */
static int set_current(struct build *b, const char *id, struct err *e)
{
	pthread_mutex_lock(&active_mu);
	snprintf(b->cur, sizeof(b->cur), "%s", id ? id : "");
	int cancelled = __atomic_load_n(&b->cancelled, __ATOMIC_ACQUIRE);
	pthread_mutex_unlock(&active_mu);
	if (cancelled)
		return err_set(e, ERR_UNAVAILABLE, ECANCELED, "deskboxd stopped during the build");
	return 0;
}

void image_builds_cancel(void)
{
	/* Each build's runtime_run() sees the flag within 200 ms and kills its
	 * container; between containers set_current() stops the build. */
	pthread_mutex_lock(&active_mu);
	for (size_t i = 0; i < IMAGE_BUILDS_MAX; i++)
		if (active[i])
			__atomic_store_n(&active[i]->cancelled, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&active_mu);
}

/* Lists `b` among the builds under way (add) or takes it off. */
static int set_active(struct build *b, int add)
{
	int r = add ? -EBUSY : 0;
	pthread_mutex_lock(&active_mu);
	for (size_t i = 0; i < IMAGE_BUILDS_MAX; i++) {
		if (add && !active[i]) {
			active[i] = b;
			r = 0;
			break;
		}
		if (!add && active[i] == b)
			active[i] = NULL;
	}
	pthread_mutex_unlock(&active_mu);
	return r;
}

/* Sets K=V in a "K=V" list (replacing K). */
static int env_put(char **list, size_t *n, const char *k, const char *v)
{
	size_t kl = strlen(k);
	char *kv;
	if (asprintf(&kv, "%s=%s", k, v) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < *n; i++)
		if (strncmp(list[i], k, kl) == 0 && list[i][kl] == '=') {
			free(list[i]);
			list[i] = kv;
			return 0;
		}
	if (*n + 1 >= BUILD_ENV_MAX) {
		free(kv);
		return -E2BIG;
	}
	list[(*n)++] = kv;
	return 0;
}

static const char *env_get(char *const *list, size_t n, const char *k)
{
	size_t kl = strlen(k);
	for (size_t i = 0; i < n; i++)
		if (strncmp(list[i], k, kl) == 0 && list[i][kl] == '=')
			return list[i] + kl + 1;
	return NULL;
}

/* One container on the tree: argv as uid:gid in `cwd`, the context
 * mounted read-only at /.deskbox/context with `context`. */
static int container(struct build *b, const char *const *argv, const char *cwd, uint32_t uid,
		     uint32_t gid, int context, const char *what, struct err *e)
{
	static const char *const points[] = {"/proc", "/sys", "/dev", "/run", "/tmp"};
	for (size_t i = 0; i < sizeof(points) / sizeof(points[0]); i++)
		if (build_mkdir_in(b, points[i], e) < 0)
			return err_code(e);
	if ((context && build_mkdir_in(b, "/.deskbox/context", e) < 0) ||
	    build_mkdir_in(b, cwd, e) < 0)
		return err_code(e);
	const char *env[2 * BUILD_ENV_MAX + 4];
	size_t n = 0;
	char path[DOCKERFILE_PATH_MAX + 8], home[16];
	const char *p = env_get(b->env, b->n_env, "PATH");
	snprintf(path, sizeof(path), "PATH=%s", p ? p : DOCKERFILE_DEFAULT_PATH);
	snprintf(home, sizeof(home), "HOME=%s", uid ? "/" : "/root");
	env[n++] = path;
	if (!env_get(b->env, b->n_env, "HOME"))
		env[n++] = home;
	for (size_t i = 0; i < b->n_env; i++)
		if (strncmp(b->env[i], "PATH=", 5) != 0)
			env[n++] = b->env[i];
	for (size_t i = 0; i < b->n_args; i++)
		env[n++] = b->args[i];
	env[n] = NULL;
	char ctx[PATH_MAX + 16], id[64], hex[17];
	snprintf(ctx, sizeof(ctx), "%s/context", b->tmp);
	if (fs_random_hex(hex, (sizeof(hex) - 1) / 2, e) < 0)
		return err_code(e);
	snprintf(id, sizeof(id), "deskbox-build-%s", hex);
	struct runtime_mount m = {ctx, "/.deskbox/context", 1};
	struct runtime_spec spec = {
	    .id = id,
	    .bundle_dir = b->bundle,
	    .rootfs = b->rootfs,
	    .hostname = "build",
	    .uid = uid,
	    .gid = gid,
	    .userns_host_base = b->host_base,
	    .userns_path = b->userns,
	    .caps = build_caps,
	    .allow_chroot = 1,
	    .argv = argv,
	    .env = env,
	    .cwd = cwd,
	    .mounts = context ? &m : NULL,
	    .n_mounts = context ? 1 : 0,
	    .memory_bytes = BUILD_MEMORY_BYTES,
	    .pids_max = BUILD_PIDS_MAX,
	    .cgroup_parent = "deskbox",
	};
	long long left = b->deadline_ms - clock_mono_ms();
	if (left <= 0)
		return err_set(e, ERR_TIMEOUT, ETIMEDOUT, "the build took longer than %u s",
			       b->timeout_s);
	int status = 0;
	b->last[0] = '\0';
	if (runtime_write_bundle(&spec, e) < 0 || set_current(b, id, e) < 0 ||
	    runtime_userns_make(b->userns, b->host_base, e) < 0)
		return err_code(e);
	int r = runtime_run(b->rt, id, b->bundle, b->log_w, (int)left, &b->cancelled, &status, e);
	runtime_userns_drop(b->userns);
	if (set_current(b, NULL, e) < 0)
		return err_code(e);
	if (r < 0 && e->kind == ERR_TIMEOUT)
		return err_set(e, ERR_TIMEOUT, ETIMEDOUT,
			       "%s: the build took longer than %u s (its time limit)", what,
			       b->timeout_s);
	if (r < 0)
		return err_wrap(e, "%s", what);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	/* The drain thread may not have read the last line yet. */
	usleep(50 * 1000);
	return err_set(e, ERR_INVALID, EIO, "%s failed (exit status %d): %s", what,
		       WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), b->last);
}

/* A path of the Dockerfile, absolute: relative ones are under WORKDIR. */
static void abs_path(const struct build *b, const char *p, char *out, size_t size)
{
	if (p[0] == '/')
		snprintf(out, size, "%s", p);
	else
		snprintf(out, size, "%s/%s", strcmp(b->workdir, "/") ? b->workdir : "", p);
}

static int run_step(struct build *b, const struct dockerfile_step *st, const char *what,
		    struct err *e)
{
	uint32_t uid, gid;
	if (build_user_ids(b, &uid, &gid, e) < 0)
		return err_wrap(e, "%s", what);
	const char *shell[] = {"/bin/sh", "-c", st->argv[0], NULL};
	return container(b, st->exec_form ? (const char *const *)st->argv : shell, b->workdir, uid,
			 gid, 0, what, e);
}

static int copy_step(struct build *b, const struct dockerfile_step *st, const char *what,
		     struct err *e)
{
	if (!b->context)
		return err_set(e, ERR_INVALID, EINVAL,
			       "%s needs a build context: upload one (PUT /v1/images/%s/context) "
			       "or give 'context'",
			       what, b->name);
	char dest[DOCKERFILE_PATH_MAX + 8];
	abs_path(b, st->argv[st->argc - 1], dest, sizeof(dest));
	const char *argv[DOCKERFILE_MAX_ARGS + 12] = {
	    "/bin/sh",
	    "-c",
	    copy_script,
	    "sh",
	    dest,
	    st->chown ? st->chown : "",
	    st->chmod ? st->chmod : "",
	    st->op == DF_ADD ? "add" : "",
	};
	size_t n = 8;
	for (size_t i = 0; i + 1 < st->argc; i++) {
		const char *s = st->argv[i];
		size_t sl = strlen(s);
		/* Only the image's own tree is reachable from the container, but
		 * a source outside the context is a mistake to name. */
		if (strcmp(s, "..") == 0 || strncmp(s, "../", 3) == 0 || strstr(s, "/../") ||
		    (sl >= 3 && strcmp(s + sl - 3, "/..") == 0))
			return err_set(e, ERR_INVALID, EINVAL,
				       "%s: '%s' is outside the build context", what, s);
		argv[n++] = s[0] == '/' ? s + 1 : s; /* "/x" is the context's x, as in Docker */
		if (!argv[n - 1][0])
			argv[n - 1] = ".";
	}
	argv[n] = NULL;
	return container(b, argv, "/", 0, 0, 1, what, e);
}

/* CMD, ENTRYPOINT as the argv they run ("/bin/sh -c" for the shell form). */
static cJSON *command_json(const struct dockerfile_step *st)
{
	cJSON *a = cJSON_CreateArray();
	if (!st->exec_form) {
		cJSON_AddItemToArray(a, cJSON_CreateString("/bin/sh"));
		cJSON_AddItemToArray(a, cJSON_CreateString("-c"));
	}
	for (size_t i = 0; i < st->argc; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(st->argv[i]));
	return a;
}

static cJSON *config_item(cJSON *config, const char *key, int array)
{
	cJSON *it = cJSON_GetObjectItemCaseSensitive(config, key);
	if (!it)
		it = array ? cJSON_AddArrayToObject(config, key)
			   : cJSON_AddObjectToObject(config, key);
	return it;
}

/* What only changes the build's state or the recorded config. */
static int state_step(struct build *b, const struct dockerfile_step *st, struct err *e)
{
	cJSON *c = b->config;
	switch (st->op) {
	case DF_ENV:
	case DF_ARG:
		for (size_t i = 0; i + 1 < st->argc; i += 2) {
			int r = st->op == DF_ENV
				    ? env_put(b->env, &b->n_env, st->argv[i], st->argv[i + 1])
				    : env_put(b->args, &b->n_args, st->argv[i], st->argv[i + 1]);
			if (r < 0)
				return err_set(e, ERR_LIMIT, -r, "too many variables");
		}
		return 0;
	case DF_WORKDIR:
		snprintf(b->workdir, sizeof(b->workdir), "%s", st->argv[0]);
		cJSON_DeleteItemFromObject(c, "workdir");
		cJSON_AddStringToObject(c, "workdir", b->workdir);
		return build_mkdir_in(b, b->workdir, e);
	case DF_USER:
		snprintf(b->user, sizeof(b->user), "%s", st->argv[0]);
		cJSON_DeleteItemFromObject(c, "user");
		cJSON_AddStringToObject(c, "user", b->user);
		return 0;
	case DF_CMD:
	case DF_ENTRYPOINT: {
		const char *key = st->op == DF_CMD ? "cmd" : "entrypoint";
		cJSON_DeleteItemFromObject(c, key);
		cJSON_AddItemToObject(c, key, command_json(st));
		return 0;
	}
	case DF_LABEL: {
		cJSON *l = config_item(c, "labels", 0);
		for (size_t i = 0; i + 1 < st->argc; i += 2) {
			cJSON_DeleteItemFromObjectCaseSensitive(l, st->argv[i]);
			cJSON_AddStringToObject(l, st->argv[i], st->argv[i + 1]);
		}
		return 0;
	}
	default:
		break;
	}
	const char *key = st->op == DF_EXPOSE ? "exposed_ports" : "volumes";
	if (st->op == DF_STOPSIGNAL) {
		cJSON_DeleteItemFromObject(c, "stop_signal");
		cJSON_AddStringToObject(c, "stop_signal", st->argv[0]);
		return 0;
	}
	cJSON *arr = config_item(c, key, 1);
	for (size_t i = 0; i < st->argc; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(st->argv[i]));
	return 0;
}

static int step(struct build *b, size_t i, struct err *e)
{
	const struct dockerfile_step *st = &b->df->steps[i];
	char what[64], words[240];
	snprintf(what, sizeof(what), "%s (line %u)", dockerfile_op_name(st->op), st->line);
	size_t off = 0;
	for (size_t k = 0; k < st->argc && off + 4 < sizeof(words); k++)
		off += (size_t)snprintf(words + off, sizeof(words) - off, "%s%s", k ? " " : "",
					st->argv[k]);
	words[sizeof(words) - 1] = '\0';
	build_say(b, "STEP %zu/%zu: %s %s%s\n", i + 1, b->df->n_steps, dockerfile_op_name(st->op),
		  words, off + 4 >= sizeof(words) ? "..." : "");
	if (st->op == DF_FROM)
		return 0;
	if (st->op == DF_RUN)
		return run_step(b, st, what, e);
	if (st->op == DF_COPY || st->op == DF_ADD)
		return copy_step(b, st, what, e);
	return state_step(b, st, e) < 0 ? err_wrap(e, "%s", what) : 0;
}

/* FROM's image: its stored name into `out` (":latest" dropped; other
 * tags and digests refused: deskbox's images have names only) and its
 * tree into `lower` ("" for scratch). */
static int from_image(const char *state_dir, const struct dockerfile *df, char *out, size_t size,
		      char *lower, size_t lower_size, struct err *e)
{
	const char *from = dockerfile_from(df);
	unsigned line = 0;
	for (size_t i = 0; i < df->n_steps && !line; i++)
		if (df->steps[i].op == DF_FROM)
			line = df->steps[i].line;
	size_t n = strlen(from);
	if (n > 7 && strcmp(from + n - 7, ":latest") == 0)
		n -= 7;
	snprintf(out, size, "%.*s", (int)n, from);
	lower[0] = '\0';
	if (strcmp(out, "scratch") == 0)
		return 0;
	if (strcmp(out, IMAGE_DEFAULT) == 0)
		return err_set(
		    e, ERR_INVALID, EINVAL,
		    "Dockerfile line %u: FROM default: the default image cannot be a base "
		    "(its /usr is the host's); import one (POST /v1/images)",
		    line);
	if (!image_name_valid(out))
		return err_set(e, ERR_INVALID, EINVAL,
			       "Dockerfile line %u: FROM '%.100s': name an image of this deskboxd "
			       "(GET /v1/images; they have no tags) or scratch",
			       line, from);
	struct err e2 = ERR_INIT;
	if (image_lookup(state_dir, out, lower, lower_size, &e2) == 0)
		return 0;
	if (e2.sys_errno == ENOENT && !strstr(e2.msg, "broken"))
		return err_set(e, ERR_NOT_FOUND, ENOENT,
			       "Dockerfile line %u: FROM image '%s' does not exist (GET /v1/images "
			       "lists them; import one with POST /v1/images)",
			       line, out);
	return err_set(e, ERR_INVALID, EINVAL, "Dockerfile line %u: FROM: %s", line, e2.msg);
}

/* The base's tree copied into the build's, with its recorded config. */
static int make_tree(struct build *b, struct err *e)
{
	char base[IMAGE_NAME_MAX + 8], lower[PATH_MAX], from[PATH_MAX + 8];
	if (from_image(b->state_dir, b->df, base, sizeof(base), lower, sizeof(lower), e) < 0 ||
	    fs_mkdir_p(b->rootfs, 0755, e) < 0)
		return err_code(e);
	if (lower[0]) {
		snprintf(from, sizeof(from), "%s/.", lower);
		const char *cp[] = {"cp", "-a", "--reflink=auto", from, b->rootfs, NULL};
		if (build_tool(b, cp, e) < 0)
			return err_wrap(e, "copying image '%s'", base);
		char mpath[PATH_MAX + 32];
		snprintf(mpath, sizeof(mpath), "%.*s/manifest.json", (int)(strlen(lower) - 7),
			 lower);
		_cleanup_free_ char *text = NULL;
		size_t len;
		struct err e2 = ERR_INIT;
		cJSON *m = fs_read_file(mpath, 1 << 22, &text, &len, &e2) == 0
			       ? cJSON_ParseWithLength(text, len)
			       : NULL;
		cJSON *c = cJSON_DetachItemFromObjectCaseSensitive(m, "config");
		cJSON_Delete(m);
		if (cJSON_IsObject(c)) {
			cJSON_Delete(b->config);
			b->config = c;
		} else {
			cJSON_Delete(c);
		}
	}
	const cJSON *kv;
	cJSON_ArrayForEach(kv, cJSON_GetObjectItemCaseSensitive(b->config, "env"))
	{
		const char *eq = cJSON_IsString(kv) ? strchr(kv->valuestring, '=') : NULL;
		if (eq && b->n_env + 1 < BUILD_ENV_MAX &&
		    (b->env[b->n_env] = strdup(kv->valuestring)))
			b->n_env++;
	}
	const cJSON *wd = cJSON_GetObjectItemCaseSensitive(b->config, "workdir");
	const cJSON *user = cJSON_GetObjectItemCaseSensitive(b->config, "user");
	snprintf(b->workdir, sizeof(b->workdir), "%s", cJSON_IsString(wd) ? wd->valuestring : "/");
	snprintf(b->user, sizeof(b->user), "%s", cJSON_IsString(user) ? user->valuestring : "");
	return build_shift_tree(b->rootfs, b->host_base, 1, e);
}

/* The context (a tar or a directory) into <tmp>/context, owned by the
 * build's root. */
static int make_context(struct build *b, struct err *e)
{
	char dir[PATH_MAX + 16], from[PATH_MAX + 8];
	snprintf(dir, sizeof(dir), "%s/context", b->tmp);
	if (fs_mkdir_p(dir, 0755, e) < 0)
		return err_code(e);
	if (!b->context)
		return 0;
	struct stat st;
	if (stat(b->context, &st) < 0)
		return err_sys(e, ERR_INVALID, errno, "the build context '%s'", b->context);
	snprintf(from, sizeof(from), "%s/.", b->context);
	const char *cp[] = {"cp", "-a", "--no-preserve=ownership", from, dir, NULL};
	const char *tar[] = {"tar", "-xf", b->context, "-C", dir, "--no-same-owner", NULL};
	if (build_tool(b, S_ISDIR(st.st_mode) ? cp : tar, e) < 0)
		return err_wrap(e, "unpacking the build context");
	return build_shift_tree(dir, b->host_base, 1, e);
}

static void add_digest(cJSON *m, const char *text)
{
	struct sha256_ctx h;
	uint8_t d[SHA256_DIGEST_SIZE];
	sha256_init(&h);
	sha256_update(&h, strlen(text), (const uint8_t *)text);
	sha256_digest(&h, sizeof(d), d);
	char hex[8 + 2 * SHA256_DIGEST_SIZE + 1] = "sha256:";
	for (size_t i = 0; i < sizeof(d); i++)
		snprintf(hex + 7 + 2 * i, 3, "%02x", d[i]);
	cJSON_AddStringToObject(m, "digest", hex);
}

static int build_run(struct build *b, long long t0, cJSON **out, struct err *e)
{
	if (image_tmp_dir(b->state_dir, b->name, b->tmp, sizeof(b->tmp), e) < 0)
		return err_code(e);
	snprintf(b->rootfs, sizeof(b->rootfs), "%s/rootfs", b->tmp);
	snprintf(b->bundle, sizeof(b->bundle), "%s/bundle", b->tmp);
	snprintf(b->userns, sizeof(b->userns), "%s/userns", b->bundle);
	if (fs_mkdir_p(b->bundle, 0700, e) < 0 || make_tree(b, e) < 0 || make_context(b, e) < 0)
		return err_code(e);
	for (size_t i = 0; i < b->df->n_steps; i++)
		if (set_current(b, NULL, e) < 0 || step(b, i, e) < 0)
			return err_code(e);
	char p[PATH_MAX + 32];
	_cleanup_fd_ int rootfd = open(b->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
	_cleanup_fd_ int dfd = rootfd < 0 ? -1 : build_open_in(rootfd, "/.deskbox", O_PATH);
	if (dfd >= 0)
		unlinkat(dfd, "context", AT_REMOVEDIR); /* the mount point, if empty */
	snprintf(p, sizeof(p), "%s/context", b->tmp);
	if (build_shift_tree(b->rootfs, b->host_base, 0, e) < 0 || fs_remove_tree(p, e) < 0 ||
	    fs_remove_tree(b->bundle, e) < 0)
		return err_code(e);
	cJSON *m = cJSON_CreateObject();
	char source[IMAGE_NAME_MAX + 32];
	snprintf(source, sizeof(source), "dockerfile:%s", dockerfile_from(b->df));
	cJSON_AddStringToObject(m, "source", source);
	add_digest(m, b->text);
	cJSON_DeleteItemFromObject(b->config, "env");
	cJSON *env = cJSON_AddArrayToObject(b->config, "env");
	for (size_t i = 0; i < b->n_env; i++)
		cJSON_AddItemToArray(env, cJSON_CreateString(b->env[i]));
	cJSON_AddItemToObject(m, "config", b->config);
	b->config = NULL;
	cJSON_AddNumberToObject(m, "steps", (double)b->df->n_steps);
	cJSON_AddNumberToObject(m, "build_seconds", (double)(clock_mono_ms() - t0) / 1000.0);
	return image_finish(b->state_dir, b->name, b->tmp, m, out, e);
}

static void build_free(struct build *b)
{
	for (size_t i = 0; i < b->n_env; i++)
		free(b->env[i]);
	for (size_t i = 0; i < b->n_args; i++)
		free(b->args[i]);
	cJSON_Delete(b->config);
	dockerfile_free(b->df);
	free(b->state_dir), free(b->name), free(b->context), free(b->text);
	free(b);
}

static void *build_thread(void *arg)
{
	struct build *b = arg;
	char logp[PATH_MAX], st[PATH_MAX];
	image_build_log_path(b->state_dir, b->name, logp, sizeof(logp));
	int logfd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	int p[2] = {-1, -1};
	pthread_t t;
	struct build_drain d = {-1, logfd, b->last, sizeof(b->last)};
	struct err e = ERR_INIT;
	cJSON *m = NULL;
	long long t0 = clock_mono_ms();
	b->deadline_ms = t0 + b->timeout_s * 1000LL;
	int r = logfd < 0 || pipe2(p, O_CLOEXEC) < 0
		    ? err_sys(&e, ERR_INTERNAL, errno, "the build log '%s'", logp)
		    : 0;
	d.fd = p[0];
	if (r == 0 && pthread_create(&t, NULL, build_drain, &d) != 0) {
		r = err_set(&e, ERR_INTERNAL, EAGAIN, "starting the log thread");
		close(p[0]);
	}
	b->log_w = p[1];
	if (r == 0) {
		build_say(b, "build %s of image '%s'\n", b->id, b->name);
		r = build_run(b, t0, &m, &e);
		if (r < 0)
			build_say(b, "\nthe build failed: %s\n", e.msg);
		else
			build_say(b, "\nimage '%s' built in %.1f s\n", b->name,
				  (double)(clock_mono_ms() - t0) / 1000.0);
		close(b->log_w);
		pthread_join(t, NULL);
	} else if (p[1] >= 0) {
		close(p[1]);
	}
	if (logfd >= 0)
		close(logfd);
	if (b->context_owned && b->context)
		unlink(b->context);
	if (r < 0) {
		log_msg(LOG_LEVEL_WARN, "image '%s': %s", b->name, e.msg);
		if (b->tmp[0]) {
			struct err e2 = ERR_INIT;
			fs_remove_tree(b->tmp, &e2);
		}
		build_set_status(b, "failed", e.msg);
	} else {
		build_status_path(b->state_dir, b->name, ".json", st, sizeof(st));
		unlink(st);
		log_msg(LOG_LEVEL_INFO, "image '%s' built from a Dockerfile", b->name);
	}
	cJSON_Delete(m);
	set_active(b, 0);
	if (b->done)
		b->done(b->done_cls);
	build_free(b);
	return NULL;
}

int image_building(const char *state_dir, const char *name)
{
	/* The status file, not image_get(): the image is there (renamed into
	 * place) a moment before its build is over, the log complete. */
	char p[PATH_MAX];
	build_status_path(state_dir, name, ".json", p, sizeof(p));
	_cleanup_free_ char *text = NULL;
	size_t len;
	struct err e = ERR_INIT;
	if (fs_read_file(p, 1 << 16, &text, &len, &e) < 0)
		return 0;
	cJSON *j = cJSON_ParseWithLength(text, len);
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "status");
	int r = cJSON_IsString(st) && strcmp(st->valuestring, "building") == 0;
	cJSON_Delete(j);
	return r;
}

void image_context_path(const char *state_dir, const char *name, char *out, size_t size)
{
	build_status_path(state_dir, name, "", out, size);
	/* .build-<name> -> .context-<name>.tar */
	char *dot = strrchr(out, '/');
	char tail[NAME_MAX + 16];
	snprintf(tail, sizeof(tail), ".context-%s.tar", name);
	if (dot)
		snprintf(dot + 1, size - (size_t)(dot + 1 - out), "%s", tail);
}

/* The checks before a build starts, under the caller's lock. */
static int build_check(const struct image_dockerfile *o, struct dockerfile *df, struct err *e)
{
	char path[PATH_MAX], base[IMAGE_NAME_MAX + 8], lower[PATH_MAX];
	if (!image_name_valid(o->name))
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'name' must match [a-z0-9][a-z0-9._-]{0,62}");
	if (strcmp(o->name, IMAGE_DEFAULT) == 0)
		return err_set(e, ERR_CONFLICT, EEXIST, "image 'default' is built in");
	image_dir(o->state_dir, path, sizeof(path));
	size_t n = strlen(path);
	snprintf(path + n, sizeof(path) - n, "/%s", o->name);
	if (access(path, F_OK) == 0)
		return err_set(e, ERR_CONFLICT, EEXIST, "image '%s' exists", o->name);
	if (image_building(o->state_dir, o->name))
		return err_set(e, ERR_CONFLICT, EBUSY, "image '%s' is being built", o->name);
	if (from_image(o->state_dir, df, base, sizeof(base), lower, sizeof(lower), e) < 0)
		return err_code(e);
	for (size_t i = 0; i < df->n_steps && !o->context; i++)
		if (df->steps[i].op == DF_COPY || df->steps[i].op == DF_ADD)
			return err_set(e, ERR_INVALID, EINVAL,
				       "Dockerfile line %u: %s needs a build context: upload one "
				       "(PUT /v1/images/%s/context) or give 'context'",
				       df->steps[i].line, dockerfile_op_name(df->steps[i].op),
				       o->name);
	struct stat st;
	if (o->context && stat(o->context, &st) < 0)
		return err_sys(e, ERR_INVALID, errno, "the build context '%s'", o->context);
	return 0;
}

static struct build *build_new(const struct image_dockerfile *o, struct dockerfile *df)
{
	struct build *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->state_dir = strdup(o->state_dir);
	b->name = strdup(o->name);
	b->context = o->context ? strdup(o->context) : NULL;
	b->text = strndup(o->text, o->len);
	b->config = cJSON_CreateObject();
	b->context_owned = o->context_owned;
	b->rt = o->rt;
	b->host_base = o->host_base;
	b->timeout_s = o->timeout_s && o->timeout_s < IMAGE_BUILD_TIMEOUT_S ? o->timeout_s
									    : IMAGE_BUILD_TIMEOUT_S;
	b->done = o->done;
	b->done_cls = o->done_cls;
	b->df = df;
	struct err e = ERR_INIT;
	if (fs_random_hex(b->id, (sizeof(b->id) - 1) / 2, &e) < 0 || !b->state_dir || !b->name ||
	    (o->context && !b->context) || !b->text || !b->config) {
		b->df = NULL;
		build_free(b);
		return NULL;
	}
	return b;
}

int image_dockerfile_start(const struct image_dockerfile *o, struct err *e)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	struct dockerfile *df;
	if (!o->host_base)
		return err_set(e, ERR_NOT_IMPLEMENTED, EPERM,
			       "Dockerfile builds need user namespaces (deskboxd runs without)");
	if (dockerfile_parse_args(o->text, o->len, o->build_args, &df, e) < 0)
		return err_code(e);
	pthread_mutex_lock(&mu);
	int r = build_check(o, df, e);
	struct build *b = r == 0 ? build_new(o, df) : NULL;
	if (r == 0 && !b)
		r = err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (r < 0) {
		pthread_mutex_unlock(&mu);
		if (!b)
			dockerfile_free(df);
		return r;
	}
	if (set_active(b, 1) < 0) {
		pthread_mutex_unlock(&mu);
		b->done = NULL;
		build_free(b);
		return err_set(e, ERR_LIMIT, EBUSY, "%d image builds are under way: wait for one",
			       IMAGE_BUILDS_MAX);
	}
	char logp[PATH_MAX];
	image_build_log_path(o->state_dir, o->name, logp, sizeof(logp));
	/* There (empty) before the answer, so a reader that comes at once
	 * follows this build's log, not a 404 or an older build's. */
	int lfd = open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (lfd >= 0)
		close(lfd);
	build_set_status(b, "building", NULL);
	pthread_attr_t attr;
	pthread_t t;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, build_thread, b) != 0) {
		build_set_status(b, "failed", "could not start a thread");
		set_active(b, 0);
		b->done = NULL;
		build_free(b);
		r = err_set(e, ERR_INTERNAL, EAGAIN, "starting the build");
	}
	pthread_attr_destroy(&attr);
	pthread_mutex_unlock(&mu);
	return r;
}
