/* Following requests: the request id every answer and log line carries,
 * and what each request cost (GET /metrics, the debug access log). */
#include "common/text.h"
#include "http.h"
#include "internal.h"

#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/metrics.h"

void http_trace_request_id(char rid[HTTP_REQUEST_ID_MAX + 1], const char *client)
{
	/* The client's when it can go into headers and logs as is. */
	size_t n = client ? strlen(client) : 0;
	if (n >= 1 && n <= HTTP_REQUEST_ID_MAX &&
	    strspn(client, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
		n) {
		memcpy(rid, client, n + 1);
		return;
	}
	if (fs_random_hex(rid, 8, NULL) < 0)
		snprintf(rid, HTTP_REQUEST_ID_MAX + 1, "%llx", (unsigned long long)clock_mono_ns());
}

void http_trace_answer(const struct http_route *route, long long t0_ns, unsigned status)
{
	/* Labelled by route pattern, never by path: bounded cardinality. */
	double secs = (double)(clock_mono_ns() - t0_ns) / 1e9;
	char name[160], esc[320], labels[METRICS_LABELS_MAX];
	if (route)
		snprintf(name, sizeof(name), "%s %s", route->method, route->pattern);
	else
		snprintf(name, sizeof(name), "unmatched");
	metrics_label_escape(name, esc, sizeof(esc));
	snprintf(labels, sizeof(labels), "route=\"%.*s\",status=\"%u\"", UTF8_CUT(esc, 150),
		 status);
	metrics_count("deskbox_http_requests_total", labels, 1);
	snprintf(labels, sizeof(labels), "route=\"%.*s\"", UTF8_CUT(esc, 150));
	metrics_observe("deskbox_http_request_duration_seconds", labels, secs);
	log_msg(LOG_LEVEL_DEBUG, "%s -> %u in %.1f ms", name, status, secs * 1000);
}
