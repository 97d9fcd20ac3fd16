#include "metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Upper bounds of the histogram buckets, seconds: from a cached screenshot
 * to a cold create on a loaded machine. */
static const double buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
				 0.25,	0.5,	1,     2.5,  5,	    10,	  30};
#define N_BUCKETS (sizeof(buckets) / sizeof(buckets[0]))

/* What each metric is: its type and help line. */
static const struct {
	const char *name, *type, *help;
} known[] = {
    {"deskbox_http_requests_total", "counter", "HTTP requests answered, by route and status"},
    {"deskbox_http_request_duration_seconds", "histogram",
     "Time from the request's headers to its answer being queued, by route"},
    {"deskbox_screenshot_encode_seconds", "histogram",
     "Time to copy and encode one screenshot, by format"},
    {"deskbox_network_attach_seconds", "histogram",
     "Time to attach a sandbox's network: link, addresses, route, filter, resolver start"},
    {"deskbox_network_ready_wait_seconds", "histogram",
     "Time a create or a network change waited for the sandbox's resolver to answer"},
    {"deskbox_bridge_reconnects_total", "counter",
     "Screen mirrors started again after their bridge died"},
    {"deskbox_egress_connections_total", "counter",
     "Sandbox connections served by the egress proxy (docs/secrets.md)"},
    {"deskbox_egress_intercepted_total", "counter",
     "Egress TLS connections terminated for a secret's host"},
    {"deskbox_egress_replaced_total", "counter", "Secret placeholders replaced by their value"},
    {"deskbox_egress_refused_total", "counter",
     "Secret placeholders seen on their way to a host the secret does not allow"},
    {"deskbox_egress_upstream_failures_total", "counter",
     "Secrets' hosts whose certificate failed verification"},
    {"deskbox_upload_bytes_total", "counter", "Bytes received by file uploads"},
    {"deskbox_download_bytes_total", "counter", "Bytes sent by file downloads"},
    {"deskbox_metrics_dropped_total", "counter", "Series not recorded: the registry was full"},
};
#define N_KNOWN (sizeof(known) / sizeof(known[0]))

struct series {
	int kind; /* index into known[] */
	char labels[METRICS_LABELS_MAX];
	double value;	      /* counter; histogram: the sum */
	unsigned long long n; /* histogram: the count */
	unsigned long long bucket[N_BUCKETS];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct series table[METRICS_MAX_SERIES];
static size_t n_series;
static unsigned long long dropped;

static int kind_of(const char *name)
{
	for (size_t i = 0; i < N_KNOWN; i++)
		if (strcmp(known[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* The series name{labels}, made if new; NULL when full (under mu). */
static struct series *find(int kind, const char *labels)
{
	for (size_t i = 0; i < n_series; i++)
		if (table[i].kind == kind && strcmp(table[i].labels, labels) == 0)
			return &table[i];
	if (n_series >= METRICS_MAX_SERIES || strlen(labels) >= METRICS_LABELS_MAX) {
		dropped++;
		return NULL;
	}
	struct series *s = &table[n_series++];
	memset(s, 0, sizeof(*s));
	s->kind = kind;
	snprintf(s->labels, sizeof(s->labels), "%s", labels);
	return s;
}

void metrics_count(const char *name, const char *labels, double v)
{
	int kind = kind_of(name);
	if (kind < 0)
		return;
	pthread_mutex_lock(&mu);
	struct series *s = find(kind, labels ? labels : "");
	if (s)
		s->value += v;
	pthread_mutex_unlock(&mu);
}

void metrics_observe(const char *name, const char *labels, double seconds)
{
	int kind = kind_of(name);
	if (kind < 0)
		return;
	pthread_mutex_lock(&mu);
	struct series *s = find(kind, labels ? labels : "");
	if (s) {
		s->value += seconds;
		s->n++;
		for (size_t b = 0; b < N_BUCKETS; b++)
			if (seconds <= buckets[b])
				s->bucket[b]++;
	}
	pthread_mutex_unlock(&mu);
}

int metrics_append(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
{
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		size_t room = *cap - *len;
		int n = vsnprintf(*buf ? *buf + *len : NULL, *buf ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return -1;
		if (*buf && (size_t)n < room) {
			*len += (size_t)n;
			return 0;
		}
		size_t ncap = *cap ? *cap * 2 : 16384;
		while (ncap < *len + (size_t)n + 1)
			ncap *= 2;
		char *nb = realloc(*buf, ncap);
		if (!nb)
			return -1;
		*buf = nb;
		*cap = ncap;
	}
}

void metrics_label_escape(const char *v, char *out, size_t size)
{
	size_t n = 0;
	for (; *v && n + 3 < size; v++) {
		if (*v == '\\' || *v == '"') {
			out[n++] = '\\';
			out[n++] = *v;
		} else if (*v == '\n') {
			out[n++] = '\\';
			out[n++] = 'n';
		} else {
			out[n++] = *v;
		}
	}
	out[n] = '\0';
}

/* One series' lines. */
static int render_series(char **buf, size_t *len, size_t *cap, const struct series *s)
{
	const char *name = known[s->kind].name, *l = s->labels, *sep = s->labels[0] ? "," : "";
	if (strcmp(known[s->kind].type, "histogram") != 0)
		return metrics_append(buf, len, cap, "%s%s%s%s %.17g\n", name, l[0] ? "{" : "", l,
				      l[0] ? "}" : "", s->value);
	for (size_t b = 0; b < N_BUCKETS; b++)
		if (metrics_append(buf, len, cap, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, l, sep,
				   buckets[b], s->bucket[b]) < 0)
			return -1;
	return metrics_append(buf, len, cap,
			      "%s_bucket{%s%sle=\"+Inf\"} %llu\n%s_sum%s%s%s %.17g\n"
			      "%s_count%s%s%s %llu\n",
			      name, l, sep, s->n, name, l[0] ? "{" : "", l, l[0] ? "}" : "",
			      s->value, name, l[0] ? "{" : "", l, l[0] ? "}" : "", s->n);
}

int metrics_render(char **buf, size_t *len, size_t *cap)
{
	int r = 0;
	pthread_mutex_lock(&mu);
	for (size_t k = 0; r == 0 && k < N_KNOWN; k++) {
		r = metrics_append(buf, len, cap, "# HELP %s %s\n# TYPE %s %s\n", known[k].name,
				   known[k].help, known[k].name, known[k].type);
		if (r == 0 && strcmp(known[k].name, "deskbox_metrics_dropped_total") == 0)
			r = metrics_append(buf, len, cap, "%s %llu\n", known[k].name, dropped);
		for (size_t i = 0; r == 0 && i < n_series; i++)
			if (table[i].kind == (int)k)
				r = render_series(buf, len, cap, &table[i]);
	}
	pthread_mutex_unlock(&mu);
	return r;
}
