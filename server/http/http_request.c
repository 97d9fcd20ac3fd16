/* What a handler reads of its request: query arguments, headers, the
 * JSON body, the raw target, the credential.  Requests themselves are
 * http.c's. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "common/args.h"

const char *http_query(const struct http_request *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *http_query_n(const struct http_request *req, const char *name, size_t *len)
{
	const char *v = NULL;
	size_t n = 0;
	enum MHD_Result found = MHD_lookup_connection_value_n(req->conn, MHD_GET_ARGUMENT_KIND,
							      name, strlen(name), &v, &n);
	if (found != MHD_YES || !v)
		return NULL;
	*len = n;
	return v;
}

const char *http_header(const struct http_request *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

int http_json_body(const struct http_request *req, cJSON **out, struct err *e)
{
	*out = NULL;
	size_t i = 0;
	while (i < req->body_len && (req->body[i] == ' ' || req->body[i] == '\n' ||
				     req->body[i] == '\r' || req->body[i] == '\t'))
		i++;
	if (i == req->body_len) {
		*out = cJSON_CreateObject();
		return *out ? 0 : err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	const char *end = NULL;
	cJSON *j = cJSON_ParseWithLengthOpts(req->body, req->body_len, &end, 0);
	if (!j) {
		size_t off = end && end >= req->body ? (size_t)(end - req->body) : 0;
		return err_set(e, ERR_INVALID, 0, "malformed JSON body near byte %zu", off);
	}
	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		return err_set(e, ERR_INVALID, 0, "JSON body must be an object");
	}
	*out = j;
	return 0;
}

int http_query_int(const struct http_request *req, const char *name, int64_t min, int64_t max,
		   int64_t def, unsigned flags, int64_t *out, struct err *e)
{
	const char *s = http_query(req, name);
	*out = def;
	if (!s) {
		if (flags & ARGS_REQUIRED)
			return err_set(e, ERR_INVALID, EINVAL, "query parameter '%s' is required",
				       name);
		return 0;
	}
	if (args_parse_int(s, min, max, out) < 0)
		return err_set(e, ERR_INVALID, EINVAL,
			       "query parameter '%s' must be an integer between %lld and %lld",
			       name, (long long)min, (long long)max);
	return 0;
}

struct header_walk {
	int (*fn)(void *cls, const char *name, const char *value);
	void *cls;
	int result;
};

static enum MHD_Result header_step(void *cls, enum MHD_ValueKind kind, const char *key,
				   const char *value)
{
	(void)kind;
	struct header_walk *w = cls;
	w->result = w->fn(w->cls, key, value ? value : "");
	return w->result ? MHD_NO : MHD_YES;
}

int http_each_header(const struct http_request *req,
		     int (*fn)(void *cls, const char *name, const char *value), void *cls)
{
	struct header_walk w = {fn, cls, 0};
	MHD_get_connection_values(req->conn, MHD_HEADER_KIND, header_step, &w);
	return w.result;
}

int http_each_query(const struct http_request *req,
		    int (*fn)(void *cls, const char *name, const char *value), void *cls)
{
	struct header_walk w = {fn, cls, 0};
	MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, header_step, &w);
	return w.result;
}

const char *http_raw_query(const struct http_request *req)
{
	const char *q = req->raw_uri ? strchr(req->raw_uri, '?') : NULL;
	return q ? q + 1 : "";
}

int http_check_token(const struct http_request *req, struct err *e)
{
	return http_auth_conn(req->layer, req->conn, e);
}

void http_client_addr(const struct http_request *req, char *buf, size_t size)
{
	buf[0] = '\0';
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (!ci || !ci->client_addr)
		return;
	const struct sockaddr *sa = ci->client_addr;
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf,
			  (socklen_t)size);
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf,
			  (socklen_t)size);
}

int http_request_tls(const struct http_request *req)
{
	return http_tls(req->layer);
}

void http_request_trusted(struct http_request *req)
{
	struct http *h = req->layer;
	http_guard_request_began(h->guard, req->conn);
}

int http_stop_fd(const struct http_request *req)
{
	const struct http *h = req->layer;
	return h->stop_fd;
}
