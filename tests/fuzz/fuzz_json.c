/* Fuzzes request validation: a JSON body through the create-sandbox spec
 * parser and the generic field validators. */
#include <stdint.h>
#include <stdlib.h>

#include "common/args.h"
#include "server/sandbox/sandbox.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cJSON *j = cJSON_ParseWithLength((const char *)data, size);
	if (!j)
		return 0;
	struct err e = ERR_INIT;
	struct sandbox_spec spec;
	if (sandbox_spec_parse(j, &spec, &e) == 0) {
		if (spec.width < 320 || spec.width > 4096 || spec.height < 200 ||
		    spec.height > 4096)
			abort();
		sandbox_spec_release(&spec);
	}
	int64_t v;
	double d;
	const char *s;
	int b;
	args_int(j, "x", -5, 5, 0, 0, &v, &e);
	args_double(j, "timeout_s", 0.001, 10, 1, 0, &d, &e);
	args_string(j, "text", 16, 0, &s, &e);
	args_bool(j, "background", 0, &b, &e);
	cJSON_Delete(j);
	return 0;
}
