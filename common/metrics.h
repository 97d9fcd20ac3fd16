/* metrics: counters and histograms for GET /metrics (Prometheus text).
 *
 * The process has one registry, like it has one logger: any module records
 * into it by name without plumbing (a screenshot's encode time in
 * server/desktop, a bridge reconnect in server/sandbox), and the API
 * renders it.  Series are a metric name plus a label string, which callers
 * keep bounded (route patterns, not paths; status codes, not messages).
 * At most METRICS_MAX_SERIES series exist; past that, new ones are dropped
 * and counted in deskbox_metrics_dropped_total.  Thread-safe. */
#ifndef DESKBOX_COMMON_METRICS_H
#define DESKBOX_COMMON_METRICS_H

#include <stddef.h>

#define METRICS_MAX_SERIES 1024
#define METRICS_LABELS_MAX 200

/* Adds `v` to the counter `name`{labels} (labels: `route="x",status="200"`
 * or "" for none).  `name` must be one metrics.c describes. */
void metrics_count(const char *name, const char *labels, double v);

/* Records one observation in the histogram `name`{labels}, in seconds
 * (buckets from 1 ms to 30 s). */
void metrics_observe(const char *name, const char *labels, double seconds);

/* The registry in the Prometheus text format (0.0.4), HELP and TYPE
 * included, appended to `*buf` (malloc'd, grown as needed; *len bytes in
 * it).  -1 when out of memory. */
int metrics_render(char **buf, size_t *len, size_t *cap);

/* Appends printf-formatted text to the growing buffer of metrics_render
 * (for gauges computed at scrape time). -1 when out of memory. */
int metrics_append(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Label value text with '\', '"' and newlines escaped as the format wants,
 * into out (at most size bytes). */
void metrics_label_escape(const char *v, char *out, size_t size);

#endif
