/* Resumable uploads (docs/files.md): a PUT …/files/upload carrying
 * `Content-Range: bytes N-M/TOTAL` appends to the path's staging file
 * (files_partial.c) from N; the file appears at its path only once TOTAL
 * bytes are there, verified against `X-Content-SHA256` when the client
 * sent one.  A client cut off mid-body keeps what arrived: upload-status
 * (or HEAD …/files/upload) says how much, and the next PUT goes on from
 * there. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/metrics.h"
#include "internal_files.h"

struct resume {
	struct files_partial *p;
	struct hold hold;
	uint64_t from, to, total; /* the Content-Range */
	uint64_t received;	  /* body bytes written */
	int mode;
	char sha[65]; /* X-Content-SHA256, lowercase; "" when absent */
	char path[PATH_MAX];
};

/* "bytes N-M/TOTAL" with N <= M < TOTAL. */
static int parse_content_range(const char *h, uint64_t *from, uint64_t *to, uint64_t *total,
			       struct err *e)
{
	unsigned long long a, b, t;
	int end = 0;
	if (!h || sscanf(h, "bytes %llu-%llu/%llu%n", &a, &b, &t, &end) != 3 || h[end] != '\0' ||
	    !isdigit((unsigned char)h[6]) || a > b || b >= t)
		return err_set(e, ERR_INVALID, EINVAL,
			       "header 'Content-Range' must be 'bytes FIRST-LAST/TOTAL' with "
			       "FIRST <= LAST < TOTAL");
	*from = a;
	*to = b;
	*total = t;
	return 0;
}

static int parse_sha(const char *h, char out[65], struct err *e)
{
	out[0] = '\0';
	if (!h)
		return 0;
	if (strlen(h) != 64 || strspn(h, "0123456789abcdefABCDEF") != 64)
		return err_set(e, ERR_INVALID, EINVAL,
			       "header 'X-Content-SHA256' must be 64 hex digits");
	for (int i = 0; i < 64; i++)
		out[i] = (char)tolower((unsigned char)h[i]);
	out[64] = '\0';
	return 0;
}

static void resume_free(struct resume *r)
{
	if (!r)
		return;
	metrics_count("deskbox_upload_bytes_total", "", (double)r->received);
	files_partial_free(r->p);
	apif_hold_free(&r->hold);
	free(r);
}

/* The client went away or a write failed: what arrived stays staged. */
static void resume_abort(void *cls)
{
	resume_free(cls);
}

static int resume_write(void *cls, const char *data, size_t len, struct err *e)
{
	struct resume *r = cls;
	if (r->received + len > r->to - r->from + 1)
		return err_set(e, ERR_INVALID, EINVAL,
			       "the body is longer than its Content-Range says");
	if (apif_hold_before(&r->hold, len, e) < 0)
		return err_wrap(e, "upload of '%s'", r->path);
	if (files_partial_write(r->p, data, len, e) < 0)
		return err_code(e);
	apif_hold_after(&r->hold, len);
	r->received += len;
	return 0;
}

int api_files_resume_begin(struct http_request *req, struct http_body_sink *sink, struct err *e)
{
	struct resume *r = calloc(1, sizeof(*r));
	if (!r)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	int parents, rc;
	uint64_t have = 0;
	_cleanup_root_ struct files_root root = {.fd = -1};
	if ((rc = apif_query_path(req, "path", NULL, r->path, e)) < 0 ||
	    (rc = apif_query_flag(req, "parents", &parents, e)) < 0 ||
	    (rc = apif_query_mode(req, &r->mode, e)) < 0 ||
	    (rc = parse_content_range(http_header(req, "Content-Range"), &r->from, &r->to,
				      &r->total, e)) < 0 ||
	    (rc = parse_sha(http_header(req, "X-Content-SHA256"), r->sha, e)) < 0 ||
	    (rc = apif_open_root(req, &root, &r->hold.sb, e)) < 0 ||
	    (rc = apif_hold_declared(&r->hold, req, e)) < 0 ||
	    (rc = files_partial_open(&root, r->path, parents, &r->p, &have, e)) < 0)
		goto fail;
	if (r->from > have) {
		rc = err_set(e, ERR_CONFLICT, ERANGE,
			     "the upload of '%s' has %" PRIu64 " bytes: resume from there "
			     "(Content-Range: bytes %" PRIu64 "-…)",
			     r->path, have, have);
		goto fail;
	}
	/* From N < what is there: the rest is sent again. */
	if ((rc = files_partial_truncate(r->p, r->from, e)) < 0)
		goto fail;
	sink->write = resume_write;
	sink->abort = resume_abort;
	sink->cls = r;
	return 0;
fail:
	resume_free(r);
	return rc;
}

static int resume_incomplete(struct resume *r, struct http_response *res, uint64_t size,
			     struct err *e)
{
	char v[32];
	snprintf(v, sizeof(v), "%" PRIu64, size);
	if (http_add_header(res, "Upload-Offset", v, e) < 0)
		return err_code(e);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "path", r->path);
	cJSON_AddNumberToObject(j, "received", (double)size);
	cJSON_AddNumberToObject(j, "total", (double)r->total);
	cJSON_AddBoolToObject(j, "complete", 0);
	return http_reply_json(res, 202, j, e);
}

int api_files_resume(struct http_request *req, struct http_response *res, struct err *e)
{
	struct resume *r = req->stream;
	uint64_t size = r->from + r->received;
	if (r->received != r->to - r->from + 1)
		return err_set(e, ERR_INVALID, EINVAL,
			       "the body has %" PRIu64 " bytes, its Content-Range says %" PRIu64
			       " (%" PRIu64 " bytes are staged)",
			       r->received, r->to - r->from + 1, size);
	if (size < r->total) {
		int rc = resume_incomplete(r, res, size, e);
		resume_free(r);
		return rc;
	}
	char hex[65];
	if (files_partial_sha256(r->p, hex, e) < 0)
		return err_code(e);
	if (r->sha[0] && strcmp(hex, r->sha) != 0) {
		files_partial_discard(r->p);
		return err_set(e, ERR_CONFLICT, EILSEQ,
			       "the upload of '%s' has SHA-256 %s, X-Content-SHA256 says %s: it "
			       "was discarded (start again from byte 0)",
			       r->path, hex, r->sha);
	}
	/* On failure the http layer calls resume_abort(), which frees. */
	if (files_partial_commit(r->p, r->mode, e) < 0)
		return err_code(e);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "path", r->path);
	cJSON_AddNumberToObject(j, "size", (double)size);
	cJSON_AddStringToObject(j, "sha256", hex);
	resume_free(r);
	return http_reply_json(res, 201, j, e);
}

/* GET …/files/upload-status and HEAD …/files/upload. */
static int status_of(struct http_request *req, char *path, uint64_t *size, int64_t *mtime,
		     struct err *e)
{
	if (apif_query_path(req, "path", NULL, path, e) < 0)
		return err_code(e);
	_cleanup_root_ struct files_root root = {.fd = -1};
	if (apif_open_root(req, &root, NULL, e) < 0)
		return err_code(e);
	return files_partial_status(&root, path, size, mtime, e);
}

int api_files_upload_status(struct http_request *req, struct http_response *res, struct err *e)
{
	char path[PATH_MAX];
	uint64_t size = 0;
	int64_t mtime = 0;
	int r = status_of(req, path, &size, &mtime, e);
	if (r < 0)
		return r;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "path", path);
	cJSON_AddBoolToObject(j, "in_progress", r == 1);
	cJSON_AddNumberToObject(j, "received", (double)size);
	if (r == 1)
		cJSON_AddNumberToObject(j, "mtime", (double)mtime);
	return http_reply_json(res, 200, j, e);
}

int api_files_upload_head(struct http_request *req, struct http_response *res, struct err *e)
{
	char path[PATH_MAX];
	uint64_t size = 0;
	int64_t mtime = 0;
	if (status_of(req, path, &size, &mtime, e) < 0)
		return err_code(e);
	char v[32];
	snprintf(v, sizeof(v), "%" PRIu64, size);
	if (http_add_header(res, "Upload-Offset", v, e) < 0)
		return err_code(e);
	http_reply_empty(res, 200);
	return 0;
}
