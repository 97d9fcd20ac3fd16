/* sandbox_move: a stopped sandbox's files go to another node of the
 * cluster and come in from one (sandbox.h, "moving"; docs/cluster.md).
 *
 * What moves is everything the sandbox keeps: its state dir (sandbox.json,
 * logs, a disk image kept there) and, with a disk store, its directory
 * there (disk.img, checkpoints).  The sender streams them as two tar
 * archives one after the other (state/..., store/...; sparse, numeric
 * owners, extended attributes); the receiver unpacks them into a
 * directory with the trash prefix (a crash there leaves nothing a start
 * would load), puts the store part in place first, then the state dir, and
 * loads the sandbox as a start-up does.  The uid range travels with it:
 * nodes have distinct --userns-base ranges, and one in use here is
 * refused rather than remapped. */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fs.h"
#include "common/log.h"

#define TAR_OUT "tar -cSf - --numeric-owner --xattrs --xattrs-include='*' --one-file-system "
#define TAR_IN	"tar -xiSpf - --numeric-owner --same-owner --xattrs --xattrs-include='*' "

/* Paths go into a shell command in single quotes. */
static int quotable(const char *p, struct err *e)
{
	if (strchr(p, '\''))
		return err_set(e, ERR_INTERNAL, EINVAL, "path '%s' has a quote", p);
	return 0;
}

int sandbox_move_out_begin(struct sandboxes *s, const char *id, struct sandbox **out, char *cmd,
			   size_t size, char name[64], struct err *e)
{
	struct sandbox *sb;
	enum sandbox_status st;
	if (sandbox_get_exclusive(s, id, &sb, &st, e) < 0)
		return err_code(e);
	int r = 0;
	if (sb->moved || st == SANDBOX_DELETING)
		r = err_set(e, ERR_NOT_FOUND, ENOENT, "no sandbox '%s'", id);
	else if (st != SANDBOX_STOPPED)
		r = err_set(e, ERR_CONFLICT, EBUSY, "%s", sandbox_status_names[st]);
	char home[PATH_MAX];
	sandbox_disk_path(sb, home, sizeof(home), "");
	r = r ?: quotable(sb->dir, e) ?: quotable(home, e);
	if (r < 0)
		return sandbox_put_exclusive(sb, r, NULL);
	sandbox_disk_umount(sb);
	int n = snprintf(cmd, size, "set -e; " TAR_OUT "-C '%s' --transform 's,^\\.,state,S' .",
			 sb->dir);
	if (sb->disk_pooled && n > 0 && (size_t)n < size)
		n += snprintf(cmd + n, size - (size_t)n,
			      "; " TAR_OUT "-C '%s' --transform 's,^\\.,store,S' .", home);
	snprintf(name, 64, "%s", sb->spec.name);
	*out = sb;
	return 0;
}

int sandbox_move_out_end(struct sandboxes *s, struct sandbox *sb, int moved, struct err *e)
{
	if (!moved) {
		char upper[PATH_MAX], work[PATH_MAX];
		pthread_mutex_lock(&sb->mu);
		int r = sandbox_disk_mount(sb, upper, work, sizeof(upper), e);
		pthread_mutex_unlock(&sb->mu);
		if (r < 0)
			log_msg(LOG_LEVEL_WARN, "sandbox %s stays here: %s", sb->id, e->msg);
		err_clear(e);
		return sandbox_put_exclusive(sb, 0, NULL);
	}
	pthread_mutex_lock(&sb->mu);
	sb->moved = 1;
	pthread_mutex_unlock(&sb->mu);
	char id[SANDBOX_ID_LEN + 1];
	snprintf(id, sizeof(id), "%s", sb->id);
	sandbox_put_exclusive(sb, 0, NULL);
	return sandbox_delete(s, id, e);
}

int sandbox_move_in_begin(struct sandboxes *s, const char *id, char *tmp, size_t tsize, char *cmd,
			  size_t csize, struct err *e)
{
	if (strlen(id) != SANDBOX_ID_LEN || strspn(id, "0123456789abcdef") != SANDBOX_ID_LEN)
		return err_set(e, ERR_INVALID, EINVAL, "bad sandbox id '%.*s'", 64, id);
	char own[PATH_MAX];
	snprintf(own, sizeof(own), "%s/sandboxes/%s", s->cfg.state_dir, id);
	if (access(own, F_OK) == 0)
		return err_set(e, ERR_CONFLICT, EEXIST, "this node already has sandbox '%s'", id);
	snprintf(tmp, tsize, "%s/sandboxes/" TRASH_PREFIX "in-%s", s->cfg.state_dir, id);
	if (quotable(tmp, e) < 0)
		return err_code(e);
	if (access(tmp, F_OK) == 0)
		return err_set(e, ERR_CONFLICT, EBUSY, "sandbox '%s' is already coming in", id);
	if (mkdir(tmp, 0700) < 0)
		return err_sys(e, ERR_INTERNAL, errno, "creating '%s'", tmp);
	snprintf(cmd, csize, TAR_IN "-C '%s'", tmp);
	return 0;
}

void sandbox_move_in_abort(const char *tmp)
{
	struct err e = ERR_INIT;
	if (fs_remove_tree(tmp, &e) < 0)
		log_msg(LOG_LEVEL_WARN, "%s", e.msg);
}

/* A disk in sandbox.json but no disk.img came (a cut-short transfer). */
static int disk_missing(const cJSON *j, const char *state)
{
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "disk_mb");
	if (!cJSON_IsNumber(d) || d->valuedouble <= 0)
		return 0;
	char a[PATH_MAX], b[PATH_MAX];
	snprintf(a, sizeof(a), "%s/disk.img", state);
	snprintf(b, sizeof(b), "%s/../store/disk.img", state);
	return access(a, F_OK) < 0 && access(b, F_OK) < 0;
}

/* The uid range sandbox.json names, unless it is in use here. */
static int range_ok(struct sandboxes *s, const char *state, struct err *e)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/sandbox.json", state);
	_cleanup_free_ char *text = NULL;
	if (fs_read_file(path, 1 << 20, &text, NULL, e) < 0)
		return err_wrap(e, "the sandbox that came in");
	cJSON *j = cJSON_Parse(text);
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(j, "userns_base");
	int r = 0;
	if (!j)
		r = err_set(e, ERR_INVALID, EINVAL,
			    "the sandbox that came in has a bad sandbox.json");
	else if (disk_missing(j, state))
		r = err_set(e, ERR_INVALID, EIO, "the sandbox came in without its disk image");
	else if (cJSON_IsNumber(b) && s->cfg.userns_base) {
		uint32_t base = (uint32_t)b->valuedouble;
		if (sandbox_userns_take(s, base) < 0)
			r = err_set(e, ERR_CONFLICT, EEXIST,
				    "its uid range %u is in use on this node", base);
		else
			sandbox_userns_release(s, base); /* load takes it again */
	}
	cJSON_Delete(j);
	return r;
}

/* `from` to `to`, also across filesystems (the disk store is one). */
static int put_in_place(const char *from, const char *to, struct err *e)
{
	if (rename(from, to) == 0)
		return 0;
	if (errno != EXDEV)
		return err_sys(e, ERR_INTERNAL, errno, "moving '%s' to '%s'", from, to);
	char cmd[3 * PATH_MAX];
	snprintf(cmd, sizeof(cmd), "cp -a --sparse=always '%s' '%s'", from, to);
	if (system(cmd) != 0)
		return err_set(e, ERR_INTERNAL, EIO, "copying '%s' to '%s' failed", from, to);
	return 0;
}

int sandbox_move_in_end(struct sandboxes *s, const char *id, const char *tmp, char name[64],
			struct err *e)
{
	char state[PATH_MAX], store[PATH_MAX], own[PATH_MAX], home[PATH_MAX];
	snprintf(state, sizeof(state), "%s/state", tmp);
	snprintf(store, sizeof(store), "%s/store", tmp);
	snprintf(own, sizeof(own), "%s/sandboxes/%s", s->cfg.state_dir, id);
	home[0] = '\0';
	if (range_ok(s, state, e) < 0)
		return err_code(e);
	if (access(store, F_OK) == 0) {
		if (!s->store[0])
			return err_set(e, ERR_CONFLICT, ENOENT,
				       "its disk is in a disk store and this node has none");
		snprintf(home, sizeof(home), "%s/sandboxes/%s", s->store, id);
		if (quotable(home, e) < 0 || put_in_place(store, home, e) < 0)
			return err_code(e);
	}
	if (rename(state, own) < 0) {
		err_sys(e, ERR_INTERNAL, errno, "moving '%s' to '%s'", state, own);
		struct err e2 = ERR_INIT;
		if (home[0] && fs_remove_tree(home, &e2) < 0)
			log_msg(LOG_LEVEL_WARN, "%s", e2.msg);
		return err_code(e);
	}
	sandbox_move_in_abort(tmp);
	sandbox_load_one(s, id);
	struct sandbox *sb;
	if (sandbox_get(s, id, &sb, e) < 0)
		return err_wrap(e, "the sandbox that came in did not load");
	snprintf(name, 64, "%s", sb->spec.name);
	sandbox_put(sb);
	log_msg(LOG_LEVEL_INFO, "sandbox %s moved in from another node", id);
	return 0;
}
