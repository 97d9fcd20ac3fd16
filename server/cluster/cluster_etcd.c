/* An etcd v3 client over etcd's gRPC gateway (JSON over HTTP, libcurl):
 * cluster.h, "etcd".
 *
 * The gateway speaks the v3 API's messages as JSON: keys and values are
 * base64, 64-bit integers arrive as strings.  Each call is one POST on a
 * fresh easy handle (the client is shared by threads; calls are a few per
 * second, so no connection cache).  A call that cannot reach a member, or
 * that a member answers with "unavailable" (no leader, no quorum), goes to
 * the next member of the list; the member that answered last is tried
 * first next time.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "cluster.h"
#include "common/text.h"

#define ETCD_ANSWER_MAX (16u << 20)

struct etcd {
	char *endpoints[ETCD_MAX_ENDPOINTS]; /* "http://host:port" */
	size_t n;
	int timeout_ms;
	pthread_mutex_t mu;
	size_t current; /* the member that answered last */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

static int add_endpoint(struct etcd *c, const char *s, size_t len, struct err *e)
{
	if (!len || len > 255)
		return err_set(e, ERR_INVALID, EINVAL, "empty or too long etcd endpoint");
	if (c->n >= ETCD_MAX_ENDPOINTS)
		return err_set(e, ERR_INVALID, E2BIG, "more than %d etcd endpoints",
			       ETCD_MAX_ENDPOINTS);
	for (size_t i = 0; i < len; i++)
		if (s[i] <= ' ' || s[i] == '/' || s[i] == '@' || s[i] == '?' || s[i] == '#')
			return err_set(e, ERR_INVALID, EINVAL, "bad etcd endpoint '%.*s'", (int)len,
				       s);
	if (!memchr(s, ':', len))
		return err_set(e, ERR_INVALID, EINVAL, "etcd endpoint '%.*s' needs a port",
			       (int)len, s);
	char *u = malloc(len + 8);
	if (!u)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	snprintf(u, len + 8, "http://%.*s", (int)len, s);
	c->endpoints[c->n++] = u;
	return 0;
}

int etcd_open(struct etcd **out, const char *endpoints, int timeout_ms, struct err *e)
{
	pthread_once(&curl_once, curl_init_once);
	static const char scheme[] = "etcd://";
	if (strncmp(endpoints, scheme, sizeof(scheme) - 1) == 0)
		endpoints += sizeof(scheme) - 1;
	else if (strstr(endpoints, "://"))
		return err_set(e, ERR_INVALID, EINVAL,
			       "etcd endpoints are etcd://host:port,host:port,...");
	struct etcd *c = calloc(1, sizeof(*c));
	if (!c)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	c->timeout_ms = timeout_ms > 0 ? timeout_ms : 2000;
	pthread_mutex_init(&c->mu, NULL);
	for (const char *s = endpoints;;) {
		size_t len = strcspn(s, ",");
		if (add_endpoint(c, s, len, e) < 0) {
			etcd_close(c);
			return err_code(e);
		}
		if (!s[len])
			break;
		s += len + 1;
	}
	*out = c;
	return 0;
}

void etcd_close(struct etcd *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		free(c->endpoints[i]);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

size_t etcd_n_endpoints(const struct etcd *c)
{
	return c->n;
}

/* ---- one call ---- */

struct answer {
	char *buf;
	size_t len;
	int overflow;
};

static size_t on_data(char *data, size_t size, size_t n, void *cls)
{
	struct answer *a = cls;
	size_t len = size * n;
	if (a->len + len > ETCD_ANSWER_MAX) {
		a->overflow = 1;
		return 0;
	}
	char *nb = realloc(a->buf, a->len + len + 1);
	if (!nb)
		return 0;
	memcpy(nb + a->len, data, len);
	a->buf = nb;
	a->len += len;
	a->buf[a->len] = '\0';
	return len;
}

/* One POST to one member: 0 with the HTTP status in *status and the body
 * in `a`, -1 when the member could not be reached in time. */
static int post_one(struct etcd *c, size_t i, const char *path, const char *body, long *status,
		    struct answer *a, char *why, size_t why_size)
{
	CURL *h = curl_easy_init();
	if (!h) {
		snprintf(why, why_size, "curl_easy_init failed");
		return -1;
	}
	char url[320];
	snprintf(url, sizeof(url), "%s%s", c->endpoints[i], path);
	struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)c->timeout_ms);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)(c->timeout_ms < 1000 ? c->timeout_ms : 1000));
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROXY, "");
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
	CURLcode rc = curl_easy_perform(h);
	if (rc == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	else
		snprintf(why, why_size, "%s: %s", c->endpoints[i], curl_easy_strerror(rc));
	curl_slist_free_all(hdr);
	curl_easy_cleanup(h);
	return rc == CURLE_OK && !a->overflow ? 0 : -1;
}

/* The gateway's error body: {"error":"...","code":N,"message":"..."}. */
static const char *error_text(const cJSON *j)
{
	const char *m = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "message"));
	if (!m)
		m = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "error"));
	return m ? m : "no message";
}

/* gRPC codes 14 (unavailable) and 4 (deadline exceeded): this member has
 * no leader or quorum now; another might. */
static int retryable(const cJSON *j, long status)
{
	const cJSON *code = cJSON_GetObjectItemCaseSensitive(j, "code");
	int grpc = cJSON_IsNumber(code) ? code->valueint : 0;
	return status >= 500 && (grpc == 14 || grpc == 4 || grpc == 0);
}

int etcd_call(struct etcd *c, const char *path, cJSON *req, cJSON **out, struct err *e)
{
	char *body = cJSON_PrintUnformatted(req);
	cJSON_Delete(req);
	if (!body)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	pthread_mutex_lock(&c->mu);
	size_t first = c->current;
	pthread_mutex_unlock(&c->mu);
	char why[ERR_MSG_MAX / 2] = "no etcd endpoint";
	for (size_t k = 0; k < c->n; k++) {
		size_t i = (first + k) % c->n;
		struct answer a = {0};
		long status = 0;
		if (post_one(c, i, path, body, &status, &a, why, sizeof(why)) < 0) {
			free(a.buf);
			continue;
		}
		cJSON *j = a.buf ? cJSON_ParseWithLength(a.buf, a.len) : NULL;
		free(a.buf);
		if (status == 200 && cJSON_IsObject(j)) {
			pthread_mutex_lock(&c->mu);
			c->current = i;
			pthread_mutex_unlock(&c->mu);
			free(body);
			*out = j;
			return 0;
		}
		snprintf(why, sizeof(why), "%s answered %ld: %s", c->endpoints[i], status,
			 j ? error_text(j) : "no JSON");
		int again = retryable(j, status);
		cJSON_Delete(j);
		if (!again && status >= 400 && status < 500) {
			free(body);
			return err_set(e, ERR_INVALID, EINVAL, "etcd %s: %s", path, why);
		}
	}
	free(body);
	return err_set(e, ERR_UNAVAILABLE, EAGAIN, "etcd %s: no member answered (%s)", path, why);
}

/* ---- JSON helpers ---- */

int64_t etcd_int(const cJSON *j, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);
	if (cJSON_IsString(v))
		return strtoll(v->valuestring, NULL, 10);
	if (cJSON_IsNumber(v))
		return (int64_t)v->valuedouble;
	return 0;
}

static void add_b64(cJSON *j, const char *name, const void *data, size_t len)
{
	char *b = base64_encode(data, len);
	cJSON_AddStringToObject(j, name, b ? b : "");
	free(b);
}

/* The key just past every key starting with `prefix` (the range end of a
 * prefix query): the last byte below 0xff incremented, the rest cut. */
static size_t prefix_end(const char *prefix, char *out, size_t size)
{
	size_t n = strlen(prefix);
	if (n >= size)
		n = size - 1;
	memcpy(out, prefix, n);
	while (n > 0 && (unsigned char)out[n - 1] == 0xff)
		n--;
	if (n > 0)
		out[n - 1] = (char)((unsigned char)out[n - 1] + 1);
	else
		out[n++] = '\0'; /* all keys: "\0" */
	return n;
}

void etcd_kvs_free(struct etcd_kvs *r)
{
	for (size_t i = 0; i < r->n; i++) {
		free(r->kv[i].key);
		free(r->kv[i].value);
	}
	free(r->kv);
	r->kv = NULL;
	r->n = 0;
}

static int kv_parse(const cJSON *j, struct etcd_kv *kv)
{
	const char *k = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "key"));
	const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "value"));
	size_t kl;
	*kv = (struct etcd_kv){0};
	kv->key = base64_decode(k ? k : "", &kl);
	kv->value = base64_decode(v ? v : "", &kv->value_len);
	if (!kv->key || !kv->value) {
		free(kv->key);
		free(kv->value);
		return -1;
	}
	kv->create_revision = etcd_int(j, "create_revision");
	kv->mod_revision = etcd_int(j, "mod_revision");
	kv->version = etcd_int(j, "version");
	kv->lease = etcd_int(j, "lease");
	return 0;
}

/* A range answer's kvs into `out`. */
static int kvs_parse(const cJSON *j, struct etcd_kvs *out, struct err *e)
{
	*out = (struct etcd_kvs){0};
	const cJSON *hdr = cJSON_GetObjectItemCaseSensitive(j, "header");
	out->revision = etcd_int(hdr, "revision");
	const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(j, "kvs");
	int n = cJSON_IsArray(kvs) ? cJSON_GetArraySize(kvs) : 0;
	if (!n)
		return 0;
	out->kv = calloc((size_t)n, sizeof(*out->kv));
	if (!out->kv)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	const cJSON *it;
	cJSON_ArrayForEach(it, kvs)
	{
		if (kv_parse(it, &out->kv[out->n]) < 0) {
			etcd_kvs_free(out);
			return err_set(e, ERR_INTERNAL, EPROTO,
				       "etcd sent a key that is not base64");
		}
		out->n++;
	}
	return 0;
}

/* ---- the key-value calls ---- */

static cJSON *range_request(const char *key, unsigned flags)
{
	cJSON *r = cJSON_CreateObject();
	add_b64(r, "key", key, strlen(key));
	if (flags & ETCD_SERIALIZABLE)
		cJSON_AddTrueToObject(r, "serializable");
	if (flags & ETCD_PREFIX) {
		char end[512];
		size_t n = prefix_end(key, end, sizeof(end));
		add_b64(r, "range_end", end, n);
	}
	return r;
}

int etcd_range(struct etcd *c, const char *key, unsigned flags, struct etcd_kvs *out, struct err *e)
{
	cJSON *ans;
	if (etcd_call(c, "/v3/kv/range", range_request(key, flags), &ans, e) < 0)
		return err_code(e);
	int r = kvs_parse(ans, out, e);
	cJSON_Delete(ans);
	return r;
}

int etcd_get(struct etcd *c, const char *key, struct etcd_kv *out, struct err *e)
{
	struct etcd_kvs r;
	if (etcd_range(c, key, 0, &r, e) < 0)
		return err_code(e);
	if (!r.n) {
		*out = (struct etcd_kv){0};
		return 0;
	}
	*out = r.kv[0];
	r.kv[0] = (struct etcd_kv){0};
	etcd_kvs_free(&r);
	return 1;
}

void etcd_kv_release(struct etcd_kv *kv)
{
	free(kv->key);
	free(kv->value);
	*kv = (struct etcd_kv){0};
}

static cJSON *put_request(const char *key, const char *value, size_t len, int64_t lease)
{
	cJSON *r = cJSON_CreateObject();
	add_b64(r, "key", key, strlen(key));
	add_b64(r, "value", value, len);
	if (lease) {
		char l[24];
		snprintf(l, sizeof(l), "%" PRId64, lease);
		cJSON_AddStringToObject(r, "lease", l);
	}
	return r;
}

int etcd_put(struct etcd *c, const char *key, const char *value, size_t len, int64_t lease,
	     struct err *e)
{
	cJSON *ans;
	if (etcd_call(c, "/v3/kv/put", put_request(key, value, len, lease), &ans, e) < 0)
		return err_code(e);
	cJSON_Delete(ans);
	return 0;
}

int etcd_delete(struct etcd *c, const char *key, int prefix, int64_t *deleted, struct err *e)
{
	cJSON *ans;
	if (etcd_call(c, "/v3/kv/deleterange", range_request(key, prefix ? ETCD_PREFIX : 0), &ans,
		      e) < 0)
		return err_code(e);
	if (deleted)
		*deleted = etcd_int(ans, "deleted");
	cJSON_Delete(ans);
	return 0;
}

/* ---- transactions ---- */

static cJSON *compare_json(const struct etcd_cmp *cmp)
{
	static const char *const targets[] = {"CREATE", "MOD", "VERSION", "VALUE"};
	static const char *const results[] = {"EQUAL", "NOT_EQUAL", "LESS", "GREATER"};
	static const char *const fields[] = {"create_revision", "mod_revision", "version"};
	cJSON *j = cJSON_CreateObject();
	add_b64(j, "key", cmp->key, strlen(cmp->key));
	cJSON_AddStringToObject(j, "target", targets[cmp->target]);
	cJSON_AddStringToObject(j, "result", results[cmp->result]);
	if (cmp->target == ETCD_CMP_VALUE) {
		add_b64(j, "value", cmp->value, strlen(cmp->value));
	} else {
		char n[24];
		snprintf(n, sizeof(n), "%" PRId64, cmp->number);
		cJSON_AddStringToObject(j, fields[cmp->target], n);
	}
	return j;
}

static cJSON *ops_json(const struct etcd_op *ops, size_t n)
{
	cJSON *a = cJSON_CreateArray();
	for (size_t i = 0; i < n; i++) {
		const struct etcd_op *o = &ops[i];
		cJSON *op = cJSON_CreateObject();
		if (o->type == ETCD_OP_PUT)
			cJSON_AddItemToObject(
			    op, "request_put",
			    put_request(o->key, o->value,
					o->value_len ? o->value_len : strlen(o->value), o->lease));
		else if (o->type == ETCD_OP_DELETE)
			cJSON_AddItemToObject(op, "request_delete_range",
					      range_request(o->key, o->prefix ? ETCD_PREFIX : 0));
		else
			cJSON_AddItemToObject(op, "request_range",
					      range_request(o->key, o->prefix ? ETCD_PREFIX : 0));
		cJSON_AddItemToArray(a, op);
	}
	return a;
}

int etcd_txn(struct etcd *c, const struct etcd_cmp *cmps, size_t n_cmps, const struct etcd_op *ok,
	     size_t n_ok, const struct etcd_op *fail, size_t n_fail, int *succeeded, struct err *e)
{
	cJSON *req = cJSON_CreateObject();
	cJSON *ca = cJSON_AddArrayToObject(req, "compare");
	for (size_t i = 0; i < n_cmps; i++)
		cJSON_AddItemToArray(ca, compare_json(&cmps[i]));
	cJSON_AddItemToObject(req, "success", ops_json(ok, n_ok));
	cJSON_AddItemToObject(req, "failure", ops_json(fail, n_fail));
	cJSON *ans;
	if (etcd_call(c, "/v3/kv/txn", req, &ans, e) < 0)
		return err_code(e);
	*succeeded = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ans, "succeeded"));
	cJSON_Delete(ans);
	return 0;
}

/* ---- leases ---- */

int etcd_lease_grant(struct etcd *c, int ttl_s, int64_t *id, struct err *e)
{
	cJSON *req = cJSON_CreateObject();
	cJSON_AddNumberToObject(req, "TTL", ttl_s);
	cJSON *ans;
	if (etcd_call(c, "/v3/lease/grant", req, &ans, e) < 0)
		return err_code(e);
	*id = etcd_int(ans, "ID");
	cJSON_Delete(ans);
	if (!*id)
		return err_set(e, ERR_UNAVAILABLE, EPROTO, "etcd granted no lease");
	return 0;
}

static cJSON *lease_request(int64_t id)
{
	cJSON *req = cJSON_CreateObject();
	char s[24];
	snprintf(s, sizeof(s), "%" PRId64, id);
	cJSON_AddStringToObject(req, "ID", s);
	return req;
}

int etcd_lease_keepalive(struct etcd *c, int64_t id, int64_t *ttl, struct err *e)
{
	cJSON *ans;
	/* A server stream: one request, one {"result":{...}} answer. */
	if (etcd_call(c, "/v3/lease/keepalive", lease_request(id), &ans, e) < 0)
		return err_code(e);
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(ans, "result");
	*ttl = etcd_int(res ? res : ans, "TTL");
	cJSON_Delete(ans);
	return 0;
}

int etcd_lease_revoke(struct etcd *c, int64_t id, struct err *e)
{
	cJSON *ans;
	if (etcd_call(c, "/v3/lease/revoke", lease_request(id), &ans, e) < 0)
		return err_code(e);
	cJSON_Delete(ans);
	return 0;
}
