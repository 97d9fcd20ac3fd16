/* sandbox_secrets: a sandbox's secrets (server/secrets/secrets.h) through
 * its life: named in the spec, given placeholders at create, in the
 * container's environment, its CA trusted inside, and bound to the egress
 * proxy while its network is attached.
 *
 * Trust inside: the system bundle (/etc/ssl/certs/ca-certificates.crt)
 * with the sandbox's CA appended after a marker line, the CA alone at
 * /etc/deskbox/egress-ca.pem, and SSL_CERT_FILE, REQUESTS_CA_BUNDLE,
 * CURL_CA_BUNDLE and NODE_EXTRA_CA_CERTS naming them (a spec env of the
 * same name wins).  Written through openat2(RESOLVE_IN_ROOT): the root
 * is the sandbox's, and a symlink it made must not lead outside. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fs.h"
#include "common/log.h"

#define BUNDLE	   "etc/ssl/certs/ca-certificates.crt"
#define CA_INSIDE  "/etc/deskbox/egress-ca.pem"
#define MARKER	   "# deskbox egress CA (added by deskboxd; removed with the secrets)\n"
#define BUNDLE_MAX (16 << 20)

static const char *const trust_env[] = {
    "SSL_CERT_FILE=/" BUNDLE,
    "REQUESTS_CA_BUNDLE=/" BUNDLE,
    "CURL_CA_BUNDLE=/" BUNDLE,
    "NODE_EXTRA_CA_CERTS=" CA_INSIDE,
};

int sandbox_spec_parse_secrets(const cJSON *req, struct sandbox_spec *spec, struct err *e)
{
	spec->n_secrets = 0;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, "secrets");
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > SECRETS_PER_SANDBOX)
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'secrets' must be an array of at most %d secret names",
			       SECRETS_PER_SANDBOX);
	const cJSON *it;
	cJSON_ArrayForEach(it, v)
	{
		/* A name; sandbox.json keeps {"name", "placeholder"}. */
		const char *name = cJSON_IsString(it) ? it->valuestring : NULL;
		const char *ph = NULL;
		if (cJSON_IsObject(it)) {
			name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "name"));
			ph = cJSON_GetStringValue(
			    cJSON_GetObjectItemCaseSensitive(it, "placeholder"));
		}
		if (!name || !secrets_name_valid(name) ||
		    (ph && (strlen(ph) != SECRETS_PLACEHOLDER_LEN ||
			    strncmp(ph, "deskbox-secret-", 15) != 0)))
			return err_set(e, ERR_INVALID, EINVAL,
				       "field 'secrets' must hold secret names");
		for (size_t i = 0; i < spec->n_secrets; i++)
			if (strcmp(spec->secrets[i].name, name) == 0)
				return err_set(e, ERR_INVALID, EINVAL,
					       "field 'secrets' names '%s' twice", name);
		struct sandbox_secret *s = &spec->secrets[spec->n_secrets++];
		snprintf(s->name, sizeof(s->name), "%s", name);
		snprintf(s->placeholder, sizeof(s->placeholder), "%s", ph ? ph : "");
	}
	return 0;
}

void sandbox_secrets_json(const struct sandbox_spec *spec, cJSON *j)
{
	if (!spec->n_secrets)
		return;
	cJSON *arr = cJSON_AddArrayToObject(j, "secrets");
	for (size_t i = 0; i < spec->n_secrets; i++) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "name", spec->secrets[i].name);
		cJSON_AddStringToObject(o, "placeholder", spec->secrets[i].placeholder);
		cJSON_AddItemToArray(arr, o);
	}
}

static int env_has(const struct sandbox_spec *spec, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; i < SANDBOX_MAX_ENV && spec->env[i]; i++)
		if (strncmp(spec->env[i], name, n) == 0 && spec->env[i][n] == '=')
			return 1;
	return 0;
}

int sandbox_secrets_resolve(struct sandbox *sb, struct err *e)
{
	struct sandbox_spec *spec = &sb->spec;
	struct secrets *store = sb->owner->cfg.secrets;
	if (spec->n_secrets && !store)
		return err_set(e, ERR_UNAVAILABLE, ENOTSUP, "secrets are not set up in deskboxd");
	for (size_t i = 0; i < spec->n_secrets; i++) {
		struct sandbox_secret *s = &spec->secrets[i];
		if (secrets_check(store, s->name, e) < 0)
			return err_set(e, ERR_INVALID, ENOENT,
				       "field 'secrets': no secret '%s' (POST /v1/secrets first)",
				       s->name);
		if (env_has(spec, s->name))
			return err_set(e, ERR_INVALID, EEXIST,
				       "'%s' is both a secret and in field 'env'", s->name);
		if (!s->placeholder[0] && secrets_placeholder_new(s->placeholder, e) < 0)
			return err_code(e);
	}
	return 0;
}

size_t sandbox_secrets_env(struct sandbox *sb, const char **env)
{
	struct sandbox_spec *spec = &sb->spec;
	if (!spec->n_secrets)
		return 0;
	size_t n = 0;
	for (size_t i = 0; i < spec->n_secrets; i++) {
		struct sandbox_secret *s = &spec->secrets[i];
		snprintf(s->kv, sizeof(s->kv), "%s=%s", s->name, s->placeholder);
		env[n++] = s->kv;
	}
	for (size_t i = 0; i < sizeof(trust_env) / sizeof(trust_env[0]); i++)
		env[n++] = trust_env[i];
	return n;
}

static int open_in(int rootfd, const char *path, int flags, mode_t mode)
{
	struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC),
			       .mode = mode,
			       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
	return (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
}

/* Opens `dir` inside the root, making what is missing of it (each part
 * found inside the root, made in its parent) owned by `owner`. */
static int dir_in(int rootfd, const char *dir, uid_t owner, struct err *e)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s", dir);
	for (char *p = path;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		*p = '\0';
		_cleanup_fd_ int fd = open_in(rootfd, path, O_PATH | O_DIRECTORY, 0);
		if (fd < 0 && errno == ENOENT) {
			char *slash = strrchr(path, '/');
			_cleanup_fd_ int pfd =
			    slash ? (*slash = '\0', open_in(rootfd, path, O_PATH | O_DIRECTORY, 0))
				  : dup(rootfd);
			if (slash)
				*slash = '/';
			const char *last = slash ? slash + 1 : path;
			if (pfd < 0 || (mkdirat(pfd, last, 0755) < 0 && errno != EEXIST))
				return err_sys(e, ERR_INTERNAL, errno, "making '/%s'", path);
			_cleanup_fd_ int made = open_in(rootfd, path, O_RDONLY | O_DIRECTORY, 0);
			if (made < 0 || fchown(made, owner, owner) < 0)
				return err_sys(e, ERR_INTERNAL, errno, "owning '/%s'", path);
			fd = open_in(rootfd, path, O_PATH | O_DIRECTORY, 0);
		}
		if (fd < 0)
			return err_sys(e, ERR_INTERNAL, errno, "opening '/%s'", path);
		if (c == '\0')
			return TAKE_FD(fd);
		*p = c;
	}
}

/* Replaces `dir`/`name` inside the root with `len` bytes, owned by
 * `owner`: a temporary file renamed over it (a symlink there is
 * replaced, never followed). */
static int put_file(int rootfd, const char *dir, const char *name, const char *data, size_t len,
		    uid_t owner, struct err *e)
{
	_cleanup_fd_ int dfd = dir_in(rootfd, dir, owner, e);
	if (dfd < 0)
		return dfd;
	char tmp[64];
	snprintf(tmp, sizeof(tmp), ".%s.deskbox", name);
	unlinkat(dfd, tmp, 0);
	_cleanup_fd_ int fd =
	    openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, data, len) != (ssize_t)len || fchown(fd, owner, owner) < 0 ||
	    fchmod(fd, 0644) < 0 || renameat(dfd, tmp, dfd, name) < 0) {
		int err = errno;
		unlinkat(dfd, tmp, 0);
		return err_sys(e, ERR_INTERNAL, err, "writing '/%s/%s'", dir, name);
	}
	return 0;
}

/* Chromium trusts only its NSS store: ~/.pki/nssdb of the sandbox's user,
 * made with the CA in it (certutil, on the host, in the sandbox's state
 * dir) and copied in when the user has none yet; one of the user's own
 * is left alone (docs/secrets.md). */
static int nss_db(struct sandbox *sb, int rootfd, const char *dir, struct err *e)
{
	uid_t user = sb->host_base + IMAGE_USER_UID;
	_cleanup_fd_ int home = open_in(rootfd, "home/user/.pki/nssdb/cert9.db", O_PATH, 0);
	if (home >= 0)
		return 0;
	char db[PATH_MAX], cmd[3 * PATH_MAX + 256];
	snprintf(db, sizeof(db), "%s/nssdb", dir);
	snprintf(cmd, sizeof(cmd),
		 "rm -rf '%s' && mkdir -p '%s' && certutil -N -d 'sql:%s' --empty-password && "
		 "certutil -A -d 'sql:%s' -t C,, -n 'deskbox egress CA' -i '%s/ca.pem'",
		 db, db, db, db, dir);
	if (system(cmd) != 0)
		return err_set(e, ERR_INTERNAL, EIO, "certutil could not make the NSS store");
	static const char *const files[] = {"cert9.db", "key4.db", "pkcs11.txt"};
	for (size_t i = 0; i < 3; i++) {
		char path[PATH_MAX + 16];
		snprintf(path, sizeof(path), "%s/%s", db, files[i]);
		_cleanup_free_ char *data = NULL;
		size_t len;
		if (fs_read_file(path, 16 << 20, &data, &len, e) < 0 ||
		    put_file(rootfd, "home/user/.pki/nssdb", files[i], data, len, user, e) < 0)
			return err_code(e);
	}
	return 0;
}

/* The bundle's text before the marker (what the image has), or "". */
static char *bundle_base(int rootfd, size_t *len)
{
	_cleanup_fd_ int fd = open_in(rootfd, BUNDLE, O_RDONLY | O_NOFOLLOW, 0);
	struct stat st;
	char *text = NULL;
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < BUNDLE_MAX &&
	    (text = malloc((size_t)st.st_size + 1)) &&
	    read(fd, text, (size_t)st.st_size) == st.st_size) {
		text[st.st_size] = '\0';
		char *m = strstr(text, MARKER);
		*len = m ? (size_t)(m - text) : (size_t)st.st_size;
		return text;
	}
	free(text);
	*len = 0;
	return strdup("");
}

void sandbox_secrets_dir(const struct sandbox *sb, char *buf, size_t size)
{
	sandbox_path(sb, buf, size, "egress");
}

int sandbox_secrets_rootfs(struct sandbox *sb, const char *rootfs, struct err *e)
{
	if (!sb->spec.n_secrets)
		return 0;
	char dir[PATH_MAX], pem_path[PATH_MAX + 8];
	sandbox_secrets_dir(sb, dir, sizeof(dir));
	if (secrets_ca_prepare(dir, e) < 0)
		return err_code(e);
	snprintf(pem_path, sizeof(pem_path), "%s/ca.pem", dir);
	_cleanup_free_ char *pem = NULL, *base = NULL, *all = NULL;
	size_t pem_len, base_len;
	if (fs_read_file(pem_path, 65536, &pem, &pem_len, e) < 0)
		return err_code(e);
	_cleanup_fd_ int rootfd = open(rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return err_sys(e, ERR_INTERNAL, errno, "opening the sandbox's root");
	base = bundle_base(rootfd, &base_len);
	if (!base || asprintf(&all, "%.*s%s%s%s", (int)base_len, base,
			      base_len && base[base_len - 1] != '\n' ? "\n" : "", MARKER, pem) < 0)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	uid_t root = sb->host_base;
	if (put_file(rootfd, "etc/deskbox", "egress-ca.pem", pem, pem_len, root, e) < 0 ||
	    put_file(rootfd, "etc/ssl/certs", "ca-certificates.crt", all, strlen(all), root, e) <
		0 ||
	    nss_db(sb, rootfd, dir, e) < 0)
		return err_wrap(e, "trusting the egress CA");
	return 0;
}

uint16_t sandbox_secrets_port(const struct sandbox *sb)
{
	struct egress *g = sb->owner->cfg.egress;
	return g && (sb->spec.n_secrets || egress_all(g)) ? egress_port(g) : 0;
}

int sandbox_secrets_bind(struct sandbox *sb, struct err *e)
{
	struct egress *g = sb->owner->cfg.egress;
	if (!g || (!sb->spec.n_secrets && !egress_all(g)) || !sb->net_addr[0])
		return 0;
	const char *names[SECRETS_PER_SANDBOX], *phs[SECRETS_PER_SANDBOX];
	for (size_t i = 0; i < sb->spec.n_secrets; i++) {
		names[i] = sb->spec.secrets[i].name;
		phs[i] = sb->spec.secrets[i].placeholder;
	}
	char dir[PATH_MAX];
	sandbox_secrets_dir(sb, dir, sizeof(dir));
	return egress_bind(g, sb->net_addr, dir, sb->spec.n_secrets, names, phs, e);
}

void sandbox_secrets_unbind(struct sandbox *sb)
{
	struct egress *g = sb->owner->cfg.egress;
	if (g && sb->net_addr[0])
		egress_unbind(g, sb->net_addr);
}

int sandbox_secrets_change(struct sandbox *sb, enum sandbox_status st,
			   const struct sandbox_secret *list, size_t n, struct err *e)
{
	struct sandbox_secret next[SECRETS_PER_SANDBOX];
	memcpy(next, list, n * sizeof(*next));
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < sb->spec.n_secrets; k++)
			if (strcmp(next[i].name, sb->spec.secrets[k].name) == 0)
				memcpy(next[i].placeholder, sb->spec.secrets[k].placeholder,
				       sizeof(next[i].placeholder));
	struct sandbox_spec old;
	old.n_secrets = sb->spec.n_secrets;
	memcpy(old.secrets, sb->spec.secrets, sizeof(old.secrets));
	pthread_mutex_lock(&sb->mu);
	sb->spec.n_secrets = n;
	memcpy(sb->spec.secrets, next, n * sizeof(*next));
	pthread_mutex_unlock(&sb->mu);
	int r = sandbox_secrets_resolve(sb, e);
	if (r == 0 && (st == SANDBOX_RUNNING || st == SANDBOX_PAUSED)) {
		char rootfs[PATH_MAX];
		sandbox_path(sb, rootfs, sizeof(rootfs), "rootfs");
		r = sandbox_secrets_rootfs(sb, rootfs, e) ?: sandbox_net_reapply(sb, e);
	}
	if (r < 0) {
		pthread_mutex_lock(&sb->mu);
		sb->spec.n_secrets = old.n_secrets;
		memcpy(sb->spec.secrets, old.secrets, sizeof(old.secrets));
		pthread_mutex_unlock(&sb->mu);
	}
	return r;
}
