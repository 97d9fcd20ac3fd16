/* network_policy: the "network" value of a sandbox spec, validated
 * strictly (it becomes nftables elements and dnsmasq arguments). */
#include "common/text.h"
#include "network.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"

/* A DNS name: labels of [a-z0-9-] (not starting or ending with '-'), 1 to
 * 63 long, at least two of them, 253 in all; upper case is folded. */
static int name_ok(const char *s, char *out, size_t size)
{
	size_t len = strlen(s);
	if (len == 0 || len > 253 || len >= size)
		return 0;
	size_t label = 0, labels = 1;
	for (size_t i = 0; i <= len; i++) {
		char c = s[i];
		if (c == '.' || c == '\0') {
			if (label == 0 || label > 63 || s[i - 1] == '-')
				return 0;
			if (c == '.')
				labels++;
			label = 0;
			out[i] = c;
			continue;
		}
		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
			return 0;
		if (c == '-' && label == 0)
			return 0;
		out[i] = c;
		label++;
	}
	/* The last label of a real name is not all digits (an address is
	 * not a name). */
	const char *last = strrchr(out, '.');
	return labels >= 2 && last && strspn(last + 1, "0123456789") != strlen(last + 1);
}

/* "A.B.C.D[/N][:PORT]" into r; 0 on success. */
static int addr_parse(const char *s, struct network_rule *r)
{
	char buf[64];
	if (strlen(s) >= sizeof(buf))
		return -1;
	snprintf(buf, sizeof(buf), "%s", s);
	char *colon = strchr(buf, ':');
	r->port = 0;
	if (colon) {
		*colon = '\0';
		char *end;
		errno = 0;
		long p = strtol(colon + 1, &end, 10);
		if (errno || *end || end == colon + 1 || p < 1 || p > 65535 || colon[1] == '+')
			return -1;
		r->port = (uint16_t)p;
	}
	char *slash = strchr(buf, '/');
	r->prefix = 32;
	if (slash) {
		*slash = '\0';
		char *end;
		errno = 0;
		long p = strtol(slash + 1, &end, 10);
		if (errno || *end || end == slash + 1 || p < 0 || p > 32 || slash[1] == '+' ||
		    slash[1] == '-')
			return -1;
		r->prefix = (unsigned)p;
	}
	struct in_addr a;
	if (inet_pton(AF_INET, buf, &a) != 1)
		return -1;
	uint32_t mask = r->prefix ? ~0u << (32 - r->prefix) : 0;
	r->addr = ntohl(a.s_addr) & mask;
	return 0;
}

static int rule_parse(const char *s, struct network_rule *r, struct err *e)
{
	memset(r, 0, sizeof(*r));
	if (strspn(s, "0123456789./:") == strlen(s) && *s) {
		if (addr_parse(s, r) < 0)
			return err_set(e, ERR_INVALID, EINVAL,
				       "network allow entry '%.*s' is not an IPv4 address, "
				       "network (A.B.C.D/N) or either with :PORT",
				       UTF8_CUT(s, 80));
		return 0;
	}
	r->is_name = 1;
	const char *name = s;
	if (strncmp(s, "*.", 2) == 0) {
		r->wildcard = 1;
		name = s + 2;
	}
	if (!name_ok(name, r->name, sizeof(r->name)))
		return err_set(e, ERR_INVALID, EINVAL,
			       "network allow entry '%.*s' is not a DNS name (like "
			       "'api.example.com' or '*.example.org'), an IPv4 address or network",
			       UTF8_CUT(s, 80));
	return 0;
}

static int parse_allow(const cJSON *v, struct network_policy *out, struct err *e)
{
	const cJSON *allow = cJSON_GetObjectItemCaseSensitive(v, "allow");
	static const char *const fields[] = {"allow", NULL};
	if (args_only(v, "network", fields, e) < 0)
		return err_code(e);
	const cJSON *it;
	if (!cJSON_IsArray(allow))
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'network.allow' must be an array of strings");
	int n = cJSON_GetArraySize(allow);
	if (n < 1 || n > NETWORK_MAX_ALLOW)
		return err_set(e, ERR_INVALID, E2BIG,
			       "field 'network.allow' must have 1 to %d entries",
			       NETWORK_MAX_ALLOW);
	out->rules = calloc((size_t)n, sizeof(*out->rules));
	if (!out->rules)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	cJSON_ArrayForEach(it, allow)
	{
		if (!cJSON_IsString(it))
			return err_set(e, ERR_INVALID, EINVAL,
				       "field 'network.allow' must hold strings only");
		if (rule_parse(it->valuestring, &out->rules[out->n_rules], e) < 0)
			return err_code(e);
		out->n_rules++;
	}
	out->mode = NETWORK_ALLOW;
	return 0;
}

int network_policy_parse(const cJSON *v, struct network_policy *out, struct err *e)
{
	memset(out, 0, sizeof(*out));
	if (!v || cJSON_IsNull(v))
		return 0;
	int r = 0;
	if (cJSON_IsString(v) && strcmp(v->valuestring, "none") == 0)
		out->mode = NETWORK_NONE;
	else if (cJSON_IsString(v) && strcmp(v->valuestring, "internet") == 0)
		out->mode = NETWORK_INTERNET;
	else if (cJSON_IsObject(v))
		r = parse_allow(v, out, e);
	else
		r = err_set(e, ERR_INVALID, EINVAL,
			    "field 'network' must be \"none\", \"internet\" or {\"allow\": [...]}");
	if (r == 0 && !(out->json = cJSON_Duplicate(v, 1)))
		r = err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (r < 0)
		network_policy_release(out);
	return r;
}

int network_policy_copy(struct network_policy *dst, const struct network_policy *src, struct err *e)
{
	memset(dst, 0, sizeof(*dst));
	dst->mode = src->mode;
	if (src->json && !(dst->json = cJSON_Duplicate(src->json, 1)))
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (src->n_rules) {
		dst->rules = calloc(src->n_rules, sizeof(*dst->rules));
		if (!dst->rules) {
			network_policy_release(dst);
			return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
		}
		memcpy(dst->rules, src->rules, src->n_rules * sizeof(*dst->rules));
		dst->n_rules = src->n_rules;
	}
	return 0;
}

void network_policy_release(struct network_policy *p)
{
	cJSON_Delete(p->json);
	free(p->rules);
	memset(p, 0, sizeof(*p));
}
