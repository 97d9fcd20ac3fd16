/* GET /metrics: the process's counters and histograms (common/metrics.h)
 * and the gauges read at scrape time, in Prometheus' text format.  It
 * needs the API token like every route but /healthz (Prometheus sends it
 * with `authorization: {credentials_file: …}`). */
#include <errno.h>
#include <stdlib.h>

#include "api.h"
#include "common/metrics.h"

static int gauges(struct api *api, char **buf, size_t *len, size_t *cap)
{
	unsigned counts[SANDBOX_DELETING + 1];
	sandboxes_count(api->sandboxes, counts);
	int r = metrics_append(buf, len, cap,
			       "# HELP deskbox_sandboxes Sandboxes by status\n"
			       "# TYPE deskbox_sandboxes gauge\n");
	for (int i = 0; r == 0 && i <= SANDBOX_DELETING; i++)
		r = metrics_append(buf, len, cap, "deskbox_sandboxes{status=\"%s\"} %u\n",
				   sandbox_status_name((enum sandbox_status)i), counts[i]);
	if (r == 0)
		r = metrics_append(buf, len, cap,
				   "# HELP deskbox_warm_pool_ready Desktops ready to be claimed\n"
				   "# TYPE deskbox_warm_pool_ready gauge\n"
				   "deskbox_warm_pool_ready %u\n",
				   pool_ready(api->pool));
	return r;
}

int api_metrics(struct http_request *req, struct http_response *res, struct err *e)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	if (gauges(req->app, &buf, &len, &cap) < 0 || metrics_render(&buf, &len, &cap) < 0) {
		free(buf);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	http_reply_data(res, 200, "text/plain; version=0.0.4; charset=utf-8", buf, len);
	return 0;
}
