/* Requests from peers and requests forwarded to them (http.h,
 * http_opts.forward and peer_secret): cluster mode's edge. */
#include <string.h>

#include "internal.h"
#include "common/text.h"

/* A request from a peer carries opts.peer_header with opts.peer_secret. */
void http_peer_check(struct http *h, struct request_ctx *c, struct MHD_Connection *conn,
		     struct err *e)
{
	if (!h->o.peer_header || !h->o.peer_secret)
		return;
	const char *v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, h->o.peer_header);
	if (!v)
		return;
	if (!text_equal_secret(v, h->o.peer_secret))
		err_set(e, ERR_UNAUTHORIZED, 0, "wrong %s", h->o.peer_header);
	else
		c->peer = 1;
}

/* opts.forward: when it sends the request elsewhere, the request head
 * goes there now and the body follows through the proxy's sink. */
void http_forward_begin(struct http *h, struct request_ctx *c, struct MHD_Connection *conn,
			const char *method, const char *url, struct err *e)
{
	struct http_request req;
	http_request_view(h, c, conn, method, url, &req);
	struct http_forward f = {.fd = -1, .what = "", .host = ""};
	int r = h->o.forward(h->o.app, &req, c->route->pattern, &f, e);
	if (r <= 0) {
		if (r < 0 && e->kind == ERR_NONE)
			err_set(e, ERR_INTERNAL, 0, "forwarding failed without a reason");
		return;
	}
	struct http_proxy_opts po = {
	    .fd = f.fd,
	    .target = c->raw_uri ? c->raw_uri : url,
	    .host = f.host[0] ? f.host : NULL,
	    .what = f.what[0] ? f.what : NULL,
	    .extra_name = f.extra_name,
	    .extra_value = f.extra_value,
	};
	if (http_proxy_begin(&req, &po, &c->sink, e) == 0) {
		c->sink_active = 1;
		c->forwarded = 1;
	}
}
