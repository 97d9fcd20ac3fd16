/* The MCP endpoint, /v1/sandboxes/{id}/mcp (docs/mcp.md): the Streamable
 * HTTP transport's side of it.  POST carries one JSON-RPC message and is
 * answered with application/json (or 202 for notifications), DELETE ends a
 * session, GET is 405 (the route table has none: deskbox opens no
 * server-initiated stream).  The protocol itself is server/mcp/. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "server/desktop/desktop.h"
#include "server/files/files.h"
#include "server/mcp/mcp.h"
#include "api.h"

/* localhost, 127.0.0.0/8 or [::1]. */
static int host_is_loopback(const char *h)
{
	struct in_addr a4;
	if (strcasecmp(h, "localhost") == 0 || strcmp(h, "[::1]") == 0)
		return 1;
	return inet_pton(AF_INET, h, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

static int host_is_ip(const char *h)
{
	struct in_addr a4;
	return h[0] == '[' || inet_pton(AF_INET, h, &a4) == 1;
}

/* DNS rebinding: a page of a foreign site whose name was pointed at this
 * server sends its own origin and a Host of the same name, so "Origin
 * matches Host" proves nothing when Host is a name.  Allowed: no Origin
 * (not a browser), a loopback origin (a page on this machine), or an origin
 * equal to a Host that is an IP address (no DNS name involved). */
static int origin_allowed(const char *origin, const char *host)
{
	if (!origin)
		return 1;
	const char *rest = NULL;
	if (strncasecmp(origin, "http://", 7) == 0)
		rest = origin + 7;
	else if (strncasecmp(origin, "https://", 8) == 0)
		rest = origin + 8;
	if (!rest)
		return 0;
	char name[256];
	size_t n = rest[0] == '[' ? strcspn(rest, "]") + 1 : strcspn(rest, ":/");
	if (n >= sizeof(name) || n == 0)
		return 0;
	memcpy(name, rest, n);
	name[n] = '\0';
	if (host_is_loopback(name))
		return 1;
	return host && host_is_ip(name) && strcasecmp(rest, host) == 0;
}

static int check_origin(struct http_request *req, struct err *e)
{
	struct api *api = req->app;
	if (!api->mcp)
		return err_set(e, ERR_UNAVAILABLE, 0, "MCP is not set up");
	if (!origin_allowed(http_header(req, "Origin"), http_header(req, "Host")))
		return err_set(e, ERR_FORBIDDEN, 0,
			       "Origin not allowed: MCP takes requests from non-browser clients "
			       "and pages on this machine");
	return 0;
}

/* The sandbox held in use while a message needs it (sandbox_use). */
struct hold {
	struct sandbox *sb;
	int used;
};

static void hold_release(void *cls)
{
	struct hold *h = cls;
	if (h->used)
		sandbox_unuse(h->sb);
	h->used = 0;
}

/* Fills `c` with what mcp_needs() asked for; what cannot be had is
 * c->unavailable (a stopped sandbox still answers initialize and
 * tools/list, and its tool calls say why they fail). */
/* The sandbox's disk reservations (sandbox_disk_reserve) for write_file. */
static int disk_reserve(void *cls, uint64_t bytes, struct err *e)
{
	return sandbox_disk_reserve(cls, bytes, e);
}

static void disk_unreserve(void *cls, uint64_t bytes)
{
	sandbox_disk_release(cls, bytes);
}

static void prepare(struct api *api, unsigned needs, struct hold *h, struct desk *d,
		    struct mcp_ctx *c, struct err *ue)
{
	*c = (struct mcp_ctx){
	    .root = {.fd = -1},
	    .exec_timeout_default_s = api->exec_timeout_default_s,
	    .exec_timeout_max_s = api->exec_timeout_max_s,
	    .max_output = api->exec_max_output,
	    .release = hold_release,
	    .release_cls = h,
	};
	int r = 0;
	if (needs & (MCP_NEED_DESK | MCP_NEED_PROCS)) {
		struct capture *cap = NULL;
		r = sandbox_use(h->sb, !!(needs & MCP_NEED_DESK), &cap, ue);
		h->used = r == 0;
		c->procs = sandbox_procs(h->sb);
		if (r == 0 && (needs & MCP_NEED_DESK)) {
			uint32_t aw, ah;
			sandbox_agent_display(h->sb, &aw, &ah);
			desk_init(d, cap, c->procs, aw, ah, api->png_level);
			c->desk = d;
		}
	}
	if (r == 0 && (needs & MCP_NEED_ROOT))
		r = sandbox_open_root(h->sb, &c->root, ue);
	if (r == 0 && (needs & MCP_NEED_QUOTA)) {
		c->reserve = disk_reserve;
		c->unreserve = disk_unreserve;
		c->reserve_cls = h->sb;
	}
	if (r < 0)
		c->unavailable = ue;
}

/* Answers a JSON-RPC error the transport produced (parse error, no
 * session) with `status`. */
static int reply_refusal(struct http_response *res, int status, cJSON *reply, struct err *e)
{
	if (!reply)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	return http_reply_json(res, status, reply, e);
}

/* Runs an admitted message with the handles it needs, and answers. */
static int run(struct http_request *req, struct http_response *res, struct sandbox *sb,
	       const struct mcp_request *r, struct err *e)
{
	struct api *api = req->app;
	struct hold h = {.sb = sb};
	struct desk d = {0};
	struct mcp_ctx c;
	struct err ue = ERR_INIT;
	prepare(api, mcp_needs(&r->msg), &h, &d, &c, &ue);
	if (c.desk)
		api_desk_observe(req, sb, &d, 0);
	struct mcp_answer a;
	int rc = mcp_handle(api->mcp, r, &c, &a, e);
	desk_obs_put(d.obs);
	hold_release(&h);
	if (c.root.fd >= 0)
		close(c.root.fd);
	if (rc < 0)
		return rc;
	if (a.outcome == MCP_ACCEPTED) {
		http_reply_empty(res, 202);
		return 0;
	}
	if (http_reply_json(res, 200, a.reply, e) < 0)
		return err_code(e);
	if (a.session_id[0] && http_add_header(res, "Mcp-Session-Id", a.session_id, e) < 0)
		return err_code(e);
	return 0;
}

int api_mcp_post(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (check_origin(req, e) < 0 || sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	struct mcp_request r = {
	    .sandbox_id = sandbox_id(sb),
	    .session_id = http_header(req, "Mcp-Session-Id"),
	    .protocol_version = http_header(req, "MCP-Protocol-Version"),
	};
	cJSON *refusal;
	enum mcp_outcome out;
	int rc;
	if (mcp_parse(req->body, req->body_len, &r.msg, &refusal) < 0)
		rc = reply_refusal(res, 400, refusal, e);
	else if (mcp_admit(api->mcp, &r, &out, &refusal) < 0)
		rc = reply_refusal(res, out == MCP_NO_SESSION ? 404 : 400, refusal, e);
	else
		rc = run(req, res, sb, &r, e);
	mcp_message_release(&r.msg);
	sandbox_put(sb);
	return rc;
}

int api_mcp_delete(struct http_request *req, struct http_response *res, struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (check_origin(req, e) < 0 || sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	const char *sid = http_header(req, "Mcp-Session-Id");
	int rc = sid ? mcp_session_end(api->mcp, sandbox_id(sb), sid, e)
		     : err_set(e, ERR_INVALID, EINVAL, "missing Mcp-Session-Id header");
	sandbox_put(sb);
	if (rc < 0)
		return rc;
	http_reply_empty(res, 204);
	return 0;
}
