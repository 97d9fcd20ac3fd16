/* cli internals shared by cli_http.c and cli_transfer.c. */
#ifndef DESKBOX_CLI_INTERNAL_H
#define DESKBOX_CLI_INTERNAL_H

#include <curl/curl.h>
#include <stddef.h>

#include "cli.h"

/* A growing byte buffer, NUL-terminated; `cap` caps what an error answer
 * may take (bytes past it are dropped). */
struct cli_buf {
	char *data;
	size_t len;
	size_t alloc;
};

int cli_buf_add(struct cli_buf *b, const void *data, size_t len);

/* A handle for `method` on c->url + `path` with the bearer token and
 * `content_type` (NULL for none) set; the header list goes to *hdrs, which
 * the caller frees with curl_slist_free_all() after the transfer. */
CURL *cli_handle(const struct cli *c, const char *method, const char *path,
		 const char *content_type, struct curl_slist **hdrs, struct err *e);

/* Runs the transfer; a curl failure is an ERR_UNAVAILABLE error. */
int cli_perform(CURL *h, const char *what, struct err *e);

/* Turns an error answer (status >= 300, its body) into `e`, recording the
 * status in c->status; always returns a negative code. */
int cli_answer_error(struct cli *c, long status, const char *body, size_t len, struct err *e);

/* Progress on stderr for transfers that take a while. */
struct cli_progress {
	int on;
	const char *label;
	double started;
	int drawn;
};

void cli_progress_start(struct cli_progress *p, const struct cli *c, const char *label);
int cli_progress_cb(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		    curl_off_t ulnow);
void cli_progress_end(struct cli_progress *p);

#endif
