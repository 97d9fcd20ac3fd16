/* What a run's result looks like in JSON, shared by the process routes
 * (api_process.c, api_process_ctx.c, api_process_sse.c). */
#include <stdio.h>
#include <stdlib.h>

#include "common/text.h"
#include "internal.h"

void api_add_output(cJSON *j, const char *name, const char *data, size_t len)
{
	if (utf8_valid(data, len)) {
		cJSON_AddStringToObject(j, name, data);
		return;
	}
	char *clean = utf8_sanitize(data, len);
	char *b64 = base64_encode(data, len);
	char key[32];
	snprintf(key, sizeof(key), "%s_b64", name);
	cJSON_AddStringToObject(j, name, clean ? clean : "");
	cJSON_AddStringToObject(j, key, b64 ? b64 : "");
	free(clean);
	free(b64);
}

cJSON *api_result_json(const struct process_result *pr, int with_output)
{
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	cJSON_AddNumberToObject(j, "exit_code", pr->exit_code);
	if (with_output) {
		api_add_output(j, "stdout", pr->out, pr->out_len);
		api_add_output(j, "stderr", pr->err, pr->err_len);
	}
	cJSON_AddBoolToObject(j, "timed_out", pr->timed_out);
	cJSON_AddBoolToObject(j, "oom_killed", pr->oom_killed);
	cJSON_AddBoolToObject(j, "truncated", pr->out_truncated || pr->err_truncated);
	cJSON_AddNumberToObject(j, "duration_ms", (double)pr->duration_ms);
	if (pr->killed)
		cJSON_AddBoolToObject(j, "killed", 1);
	return j;
}
