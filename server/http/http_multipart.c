/* multipart/form-data request bodies, through libmicrohttpd's post
 * processor, so that handlers never see the library. */
#include "http.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <strings.h>

/* libmicrohttpd hands the part callback at most this much at a time. */
#define MULTIPART_BUFFER 65536

struct http_multipart {
	struct MHD_PostProcessor *pp;
	http_part_fn fn;
	void *cls;
	struct err err; /* the callback's failure, kept until the feed returns */
};

static enum MHD_Result on_part(void *cls, enum MHD_ValueKind kind, const char *key,
			       const char *filename, const char *content_type,
			       const char *transfer_encoding, const char *data, uint64_t off,
			       size_t size)
{
	struct http_multipart *mp = cls;
	if (mp->fn(mp->cls, key, filename, data, off, size, &mp->err) < 0) {
		if (mp->err.kind == ERR_NONE)
			err_set(&mp->err, ERR_INTERNAL, 0,
				"multipart part failed without a reason");
		return MHD_NO;
	}
	return MHD_YES;
}

int http_multipart_new(struct http_request *req, http_part_fn fn, void *cls,
		       struct http_multipart **out, struct err *e)
{
	const char *ct = http_header(req, MHD_HTTP_HEADER_CONTENT_TYPE);
	if (!ct || strncasecmp(ct, "multipart/form-data", 19) != 0)
		return err_set(e, ERR_UNSUPPORTED, EINVAL, "the body must be multipart/form-data");
	struct http_multipart *mp = calloc(1, sizeof(*mp));
	if (!mp)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	mp->fn = fn;
	mp->cls = cls;
	mp->pp = MHD_create_post_processor(req->conn, MULTIPART_BUFFER, on_part, mp);
	if (!mp->pp) {
		free(mp);
		return err_set(e, ERR_INVALID, EINVAL,
			       "malformed multipart/form-data content type (no boundary?)");
	}
	*out = mp;
	return 0;
}

/* The callback's error if it failed, else a generic one. */
static int feed_error(struct http_multipart *mp, struct err *e)
{
	if (mp->err.kind != ERR_NONE) {
		*e = mp->err;
		return err_code(e);
	}
	return err_set(e, ERR_INVALID, EINVAL, "malformed multipart/form-data body");
}

int http_multipart_feed(struct http_multipart *mp, const char *data, size_t len, struct err *e)
{
	if (MHD_post_process(mp->pp, data, len) != MHD_YES)
		return feed_error(mp, e);
	return 0;
}

int http_multipart_finish(struct http_multipart *mp, struct err *e)
{
	/* Destroying the processor flushes the last part to the callback. */
	enum MHD_Result ok = MHD_destroy_post_processor(mp->pp);
	mp->pp = NULL;
	if (ok != MHD_YES || mp->err.kind != ERR_NONE)
		return feed_error(mp, e);
	return 0;
}

void http_multipart_free(struct http_multipart *mp)
{
	if (!mp)
		return;
	if (mp->pp)
		MHD_destroy_post_processor(mp->pp);
	free(mp);
}
