/* A multipart upload into a sandbox, streamed to disk as the body comes:
 * what Daytona's bulk-upload and OpenSandbox's files/upload share (the
 * sandbox held, its files root open, the multipart parser, the file being
 * written and the disk quota).  Each front-end reads its own parts. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "server/compat/internal.h"
#include "server/files/files.h"

void compat_upload_free(struct compat_upload *u)
{
	if (!u)
		return;
	http_multipart_free(u->mp);
	files_upload_free(u->fu);
	if (u->root.fd >= 0)
		close(u->root.fd);
	if (u->sb)
		sandbox_put(u->sb);
	if (u->free_extra)
		u->free_extra(u);
	free(u);
}

static void upload_abort(void *cls)
{
	compat_upload_free(cls);
}

static int upload_write(void *cls, const char *data, size_t len, struct err *e)
{
	struct compat_upload *u = cls;
	return http_multipart_feed(u->mp, data, len, e);
}

int compat_upload_begin(struct http_request *req, struct compat_upload *u, http_part_fn on_part,
			struct http_body_sink *sink, struct err *e)
{
	struct api *api = req->app;
	u->root.fd = -1;
	int r = sandbox_get(api->sandboxes, req->captures[0], &u->sb, e);
	if (r == 0)
		r = sandbox_open_root(u->sb, &u->root, e);
	if (r == 0)
		r = http_multipart_new(req, on_part, u, &u->mp, e);
	if (r < 0) {
		compat_upload_free(u);
		return r;
	}
	sink->write = upload_write;
	sink->abort = upload_abort;
	sink->cls = u;
	return 0;
}

int compat_upload_open(struct compat_upload *u, const char *canon, int mode, struct err *e)
{
	return files_upload_begin(&u->root, canon, 1, mode, &u->fu, e);
}

int compat_upload_write(struct compat_upload *u, const char *data, size_t size, struct err *e)
{
	if (!u->fu || !size)
		return 0;
	if (sandbox_disk_reserve(u->sb, size, e) < 0)
		return err_code(e);
	int r = files_upload_write(u->fu, data, size, e);
	sandbox_disk_release(u->sb, size);
	return r;
}

int compat_upload_commit(struct compat_upload *u, struct err *e)
{
	if (!u->fu)
		return 0;
	int r = files_upload_commit(u->fu, e);
	files_upload_free(u->fu);
	u->fu = NULL;
	return r;
}
