/* The Dockerfile parser (server/runtime/runtime_dockerfile.c): each
 * instruction's forms, variable substitution, line joining and comments,
 * and the refusals, each naming the instruction and its line. */
#include <string.h>

#include "server/runtime/runtime.h"
#include "tests/harness.h"

static struct dockerfile *parse(const char *text, struct err *e)
{
	struct dockerfile *df = NULL;
	*e = (struct err)ERR_INIT;
	if (dockerfile_parse(text, strlen(text), &df, e) < 0)
		return NULL;
	return df;
}

/* The error of parsing `text` contains `want`. */
static void refused(const char *text, const char *want, const char *name)
{
	struct err e;
	struct dockerfile *df = parse(text, &e);
	ok(!df && strstr(e.msg, want), name);
	if (df || !strstr(e.msg, want))
		diag(df ? "(parsed)" : e.msg);
	dockerfile_free(df);
}

static void test_forms(void)
{
	struct err e;
	struct dockerfile *df = parse("# syntax=docker/dockerfile:1\n"
				      "FROM base:latest AS build\n"
				      "\n"
				      "RUN apt-get update && \\\n"
				      "    # a comment inside\n"
				      "    echo hi\n"
				      "RUN [\"/bin/echo\", \"a b\"]\n"
				      "copy --chown=1000:1000 a.txt b/ /dst/\n"
				      "ADD --chmod=0755 tool /usr/local/bin/\n"
				      "CMD [\"python3\"]\n"
				      "ENTRYPOINT echo $HOME\n"
				      "EXPOSE 8080 53/udp\n"
				      "USER 1000:1000\n"
				      "VOLUME [\"/data\"]\n"
				      "STOPSIGNAL SIGTERM\n"
				      "MAINTAINER someone\n",
				      &e);
	ok(df != NULL, "a Dockerfile with every kept instruction parses");
	if (!df) {
		diag(e.msg);
		return;
	}
	is_int(df->n_steps, 12, "twelve instructions");
	is_str(dockerfile_from(df), "base:latest", "FROM's image, AS dropped");
	is_int(df->steps[1].line, 4, "a joined line carries its first line's number");
	is_str(df->steps[1].argv[0], "apt-get update &&  echo hi",
	       "a continuation joins, its comment line dropped");
	ok(!df->steps[1].exec_form, "RUN text is the shell form");
	ok(df->steps[2].exec_form && df->steps[2].argc == 2 &&
	       strcmp(df->steps[2].argv[1], "a b") == 0,
	   "RUN [..] is the exec form");
	ok(df->steps[3].op == DF_COPY && df->steps[3].argc == 3 &&
	       strcmp(df->steps[3].chown, "1000:1000") == 0 &&
	       strcmp(df->steps[3].argv[2], "/dst/") == 0,
	   "COPY (any case) with --chown, two sources and a destination");
	ok(df->steps[4].op == DF_ADD && strcmp(df->steps[4].chmod, "0755") == 0,
	   "ADD with --chmod");
	ok(df->steps[5].op == DF_CMD && df->steps[5].exec_form, "CMD exec form");
	is_str(df->steps[6].argv[0], "echo $HOME", "ENTRYPOINT's shell form is not substituted");
	ok(df->steps[7].argc == 2 && strcmp(df->steps[7].argv[1], "53/udp") == 0, "EXPOSE ports");
	ok(df->steps[11].op == DF_LABEL && strcmp(df->steps[11].argv[0], "maintainer") == 0,
	   "MAINTAINER is a label");
	dockerfile_free(df);
}

static void test_vars(void)
{
	struct err e;
	struct dockerfile *df = parse("ARG BASE=deb\n"
				      "FROM ${BASE}12\n"
				      "ENV A=1 B=\"two words\" C=${A:-x}${NOPE:-dflt}\n"
				      "ENV OLD legacy value $A\n"
				      "ENV PATH=/opt/bin:$PATH\n"
				      "WORKDIR /srv\n"
				      "WORKDIR app/$A\n"
				      "LABEL k='$A' \"q\"=\\$A plus=${A:+set}${NOPE:+unset}\n"
				      "COPY f* \"/d $A/\"\n",
				      &e);
	ok(df != NULL, "variables parse");
	if (!df) {
		diag(e.msg);
		return;
	}
	is_str(dockerfile_from(df), "deb12", "FROM uses an ARG from before it");
	const struct dockerfile_step *env = &df->steps[2];
	ok(env->argc == 6 && strcmp(env->argv[3], "two words") == 0 &&
	       strcmp(env->argv[5], "xdflt") == 0,
	   "ENV pairs: quotes, ${X:-word} (from before the line, as Docker)");
	ok(df->steps[3].argc == 2 && strcmp(df->steps[3].argv[0], "OLD") == 0 &&
	       strcmp(df->steps[3].argv[1], "legacy value 1") == 0,
	   "ENV key value (the old form)");
	is_str(df->steps[4].argv[1], "/opt/bin:" DOCKERFILE_DEFAULT_PATH,
	       "$PATH before any ENV PATH is the default PATH");
	is_str(df->steps[6].argv[0], "/srv/app/1", "a relative WORKDIR joins the previous one");
	const struct dockerfile_step *l = &df->steps[7];
	ok(l->argc == 6 && strcmp(l->argv[1], "$A") == 0 && strcmp(l->argv[2], "q") == 0 &&
	       strcmp(l->argv[3], "$A") == 0 && strcmp(l->argv[5], "set") == 0,
	   "single quotes and \\$ keep '$', ${X:+word}");
	ok(df->steps[8].argc == 2 && strcmp(df->steps[8].argv[1], "/d 1/") == 0,
	   "COPY words: quotes and variables");
	dockerfile_free(df);
}

static void test_refused(void)
{
	refused("FROM a\nONBUILD RUN x\n", "line 2: ONBUILD is not supported", "ONBUILD");
	refused("FROM a\n\nHEALTHCHECK CMD true\n", "line 3: HEALTHCHECK is not supported",
		"HEALTHCHECK, by line");
	refused("FROM a\nSHELL [\"/bin/bash\",\"-c\"]\n", "line 2: SHELL is not supported",
		"SHELL");
	refused("FROM a\nADD https://example.org/x /x\n", "line 2: ADD of a URL", "ADD of a URL");
	refused("FROM a\nADD git@github.com:x/y /y\n", "ADD of a URL", "ADD of a git remote");
	refused("FROM a\nFROM b\n", "line 2: a second FROM: multi-stage", "a second FROM");
	refused("FROM a\nCOPY --from=b /x /x\n", "COPY --from is not supported", "COPY --from");
	refused("FROM a\nRUN --mount=type=cache,target=/x true\n", "RUN --mount is not supported",
		"RUN --mount");
	refused("FROM a\nFROBNICATE x\n", "line 2: unknown instruction 'FROBNICATE'",
		"an unknown instruction");
	refused("RUN true\n", "line 1: RUN before FROM", "RUN before FROM");
	refused("# just a comment\n\n", "has no FROM", "no FROM");
	refused("FROM a\nCOPY onlyone\n", "needs a source and a destination", "COPY of one word");
	refused("FROM a\nENV\n", "ENV needs key=value", "ENV without a value");
	refused("FROM a\nLABEL novalue\n", "LABEL needs key=value", "LABEL without '='");
	refused("FROM a\nENV A=\"open\n", "unterminated double quote", "an open quote");
	refused("FROM a\nENV A=${B:?x}\n", "unsupported variable expansion", "${X:?}");
	refused("FROM a\nENV A=${B:-x\n", "unterminated", "an open ${");
	refused("FROM a\nEXPOSE 99999\n", "EXPOSE: bad port", "a bad port");
	refused("# escape=`\nFROM a\n", "escape directive", "another escape character");
	refused("FROM a\nUSER two words\n", "USER takes one word", "USER of two words");
	refused("FROM\n", "FROM takes an image", "FROM without an image");
	refused("FROM a\nRUN\n", "RUN needs a command", "RUN without a command");
}

static void test_limits(void)
{
	static char big[DOCKERFILE_MAX_BYTES + 2];
	memset(big, '#', sizeof(big) - 1);
	struct err e = ERR_INIT;
	struct dockerfile *df = NULL;
	ok(dockerfile_parse(big, sizeof(big) - 1, &df, &e) < 0 && e.kind == ERR_TOO_LARGE,
	   "a Dockerfile over the size bound is too large");
	char steps[16 * (DOCKERFILE_MAX_STEPS + 2)];
	size_t off = (size_t)snprintf(steps, sizeof(steps), "FROM a\n");
	for (int i = 0; i <= DOCKERFILE_MAX_STEPS; i++)
		off += (size_t)snprintf(steps + off, sizeof(steps) - off, "RUN true\n");
	e = (struct err)ERR_INIT;
	ok(dockerfile_parse(steps, off, &df, &e) < 0 && e.kind == ERR_LIMIT &&
	       strstr(e.msg, "more than"),
	   "more instructions than the bound is a limit");
	e = (struct err)ERR_INIT;
	ok(dockerfile_parse("FROM a\0RUN x", 12, &df, &e) < 0 && strstr(e.msg, "NUL"),
	   "a NUL byte is refused");
	df = parse("FROM a\nRUN echo \\", &e);
	ok(df && df->n_steps == 2 && strcmp(df->steps[1].argv[0], "echo") == 0,
	   "a continuation on the last line ends there");
	dockerfile_free(df);
	df = parse("FROM a\r\nENV A=1\r\n", &e);
	ok(df && strcmp(df->steps[1].argv[1], "1") == 0, "CRLF line ends");
	dockerfile_free(df);
}

static void test_build_args(void)
{
	static const char *const args[] = {"V=given", "EMPTY=", NULL};
	struct err e = ERR_INIT;
	struct dockerfile *df = NULL;
	const char *text = "ARG V=default\nFROM img-$V\nARG EMPTY=x\nENV A=$V-$EMPTY\n";
	ok(dockerfile_parse_args(text, strlen(text), args, &df, &e) == 0 &&
	       strcmp(dockerfile_from(df), "img-given") == 0 &&
	       strcmp(df->steps[3].argv[1], "given-") == 0,
	   "a build arg is its ARG's value, over the default");
	dockerfile_free(df);
	static const char *const stray[] = {"NOPE=1", NULL};
	e = (struct err)ERR_INIT;
	ok(dockerfile_parse_args(text, strlen(text), stray, &df, &e) < 0 &&
	       strstr(e.msg, "build arg 'NOPE' is not declared"),
	   "a build arg no ARG declares is refused");
}

int main(void)
{
	test_build_args();
	test_forms();
	test_vars();
	test_refused();
	test_limits();
	return done();
}
