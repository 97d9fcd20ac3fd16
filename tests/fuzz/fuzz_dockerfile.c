/* Fuzzes the Dockerfile parser (server/runtime/runtime_dockerfile.c), whose
 * input is a request body.  Whatever the text: a parse either fails with a
 * message naming a line (or the whole file), or yields steps that keep the
 * parser's promises: at most DOCKERFILE_MAX_STEPS, FROM first (after ARGs),
 * every argv NULL-terminated with argc words, COPY/ADD with a source and a
 * destination, pairs for ENV/LABEL/ARG, absolute WORKDIRs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/runtime/runtime.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_step(const struct dockerfile_step *st)
{
	if (!st->argv || st->argv[st->argc] || st->line == 0)
		abort();
	for (size_t i = 0; i < st->argc; i++)
		if (!st->argv[i])
			abort();
	if ((st->op == DF_COPY || st->op == DF_ADD) && st->argc < 2)
		abort();
	if ((st->op == DF_ENV || st->op == DF_LABEL || st->op == DF_ARG) &&
	    (st->argc == 0 || st->argc % 2))
		abort();
	if (st->op == DF_WORKDIR && st->argv[0][0] != '/')
		abort();
	if (st->op != DF_COPY && st->op != DF_ADD && (st->chown || st->chmod))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dockerfile *df = NULL;
	struct err e = ERR_INIT;
	if (dockerfile_parse((const char *)data, size, &df, &e) < 0) {
		if (df || !e.msg[0])
			abort();
		return 0;
	}
	if (!df || df->n_steps == 0 || df->n_steps > DOCKERFILE_MAX_STEPS || !dockerfile_from(df))
		abort();
	int from = 0;
	unsigned last = 0;
	for (size_t i = 0; i < df->n_steps; i++) {
		const struct dockerfile_step *st = &df->steps[i];
		check_step(st);
		if (st->line <= last)
			abort(); /* one instruction per logical line, in order */
		last = st->line;
		if (!from && st->op != DF_FROM && st->op != DF_ARG)
			abort();
		if (st->op == DF_FROM && from++)
			abort();
	}
	dockerfile_free(df);
	return 0;
}
