/* Anthropic's bash tool on the computer-use adapter's route: a tool_use
 * block named "bash" runs its input {"command"} or {"restart": true} in one
 * persistent shell session of the sandbox (process_session.c), as the
 * reference's BashTool keeps one bash process.  The answer is the reference's
 * tool_result: stdout as text; anything on stderr makes it is_error with the
 * stderr text (anthropic-quickstarts computer_use_demo/tools/bash.py and
 * loop.py's _make_api_tool_result); a restart answers "tool has been
 * restarted.".  Docs: docs/actions.md. */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"

#define BASH_COMMAND_MAX (256u << 10)
/* Sandboxes whose bash tool has a session, remembered here (a deleted
 * sandbox's entry is found stale and replaced). */
#define BASH_SLOTS 64

static struct {
	char sandbox[64];
	char session[PROCESS_SESSION_ID_LEN + 1];
} slots[BASH_SLOTS];
static unsigned next_slot;
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;

static int slot_get(const char *sb, char *session)
{
	int found = 0;
	pthread_mutex_lock(&slots_lock);
	for (int i = 0; i < BASH_SLOTS && !found; i++)
		if (strcmp(slots[i].sandbox, sb) == 0) {
			memcpy(session, slots[i].session, sizeof(slots[i].session));
			found = 1;
		}
	pthread_mutex_unlock(&slots_lock);
	return found;
}

static void slot_set(const char *sb, const char *session)
{
	pthread_mutex_lock(&slots_lock);
	int at = -1;
	for (int i = 0; i < BASH_SLOTS && at < 0; i++)
		if (strcmp(slots[i].sandbox, sb) == 0)
			at = i;
	if (at < 0)
		at = (int)(next_slot++ % BASH_SLOTS);
	snprintf(slots[at].sandbox, sizeof(slots[at].sandbox), "%s", sb);
	snprintf(slots[at].session, sizeof(slots[at].session), "%s", session);
	pthread_mutex_unlock(&slots_lock);
}

/* A new session for the sandbox's bash tool (the old one, if any, goes). */
static int fresh_session(struct http_request *req, char *session, struct err *e)
{
	struct sandbox *sb;
	if (api_enter(req, 0, &sb, NULL, e) < 0)
		return err_code(e);
	char old[PROCESS_SESSION_ID_LEN + 1];
	struct err ignore = ERR_INIT;
	if (slot_get(sandbox_id(sb), old))
		process_session_delete(sandbox_procs(sb), old, &ignore);
	struct process_opts o = {.cwd = "/workspace"};
	struct process_session_info in = {0};
	int r = process_session_create(sandbox_procs(sb), &o, &in, e);
	if (r == 0) {
		slot_set(sandbox_id(sb), in.id);
		memcpy(session, in.id, sizeof(in.id));
	}
	api_release(sb);
	return r;
}

static int run(struct http_request *req, const char *command, struct process_result *pr,
	       struct err *e)
{
	struct api *api = req->app;
	struct sandbox *sb;
	if (sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	char session[PROCESS_SESSION_ID_LEN + 1];
	int have = slot_get(sandbox_id(sb), session);
	sandbox_put(sb);
	if (!have && fresh_session(req, session, e) < 0)
		return err_code(e);
	struct process_opts o = {.timeout_ms = api->exec_timeout_default_s * 1000,
				 .max_output = api->exec_max_output};
	int restarted = 0;
	if (sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
		return err_code(e);
	int r = process_session_exec(sandbox_procs(sb), session, command, &o, pr, &restarted, e);
	sandbox_put(sb);
	if (r < 0 && e->kind == ERR_NOT_FOUND) {
		/* The session went (the sandbox was restored, or too many). */
		err_clear(e);
		if (fresh_session(req, session, e) < 0)
			return err_code(e);
		if (sandbox_get(api->sandboxes, req->captures[0], &sb, e) < 0)
			return err_code(e);
		r = process_session_exec(sandbox_procs(sb), session, command, &o, pr, &restarted,
					 e);
		sandbox_put(sb);
	}
	return r;
}

static void text_result(cJSON *out, const char *text, int is_error)
{
	cJSON *content = cJSON_AddArrayToObject(out, "content");
	cJSON *t = cJSON_CreateObject();
	cJSON_AddItemToArray(content, t);
	cJSON_AddStringToObject(t, "type", "text");
	cJSON_AddStringToObject(t, "text", text);
	if (is_error)
		cJSON_AddBoolToObject(out, "is_error", 1);
}

/* Fills the tool_result for `input`; a failure is an is_error result. */
static void bash(struct http_request *req, const cJSON *input, cJSON *out, char *why,
		 size_t why_size)
{
	struct err e = ERR_INIT;
	int restart = 0;
	const char *command = NULL;
	int r =
	    cJSON_IsObject(input) ? 0 : err_set(&e, ERR_INVALID, EINVAL, "input must be an object");
	if (r == 0 && (args_bool(input, "restart", 0, &restart, &e) < 0 ||
		       args_string(input, "command", BASH_COMMAND_MAX, 0, &command, &e) < 0))
		r = err_code(&e);
	if (r == 0 && restart) {
		char session[PROCESS_SESSION_ID_LEN + 1];
		if (fresh_session(req, session, &e) == 0) {
			text_result(out, "tool has been restarted.", 0);
			return;
		}
		r = err_code(&e);
	}
	if (r == 0 && (!command || !command[0]))
		r = err_set(&e, ERR_INVALID, EINVAL, "no command provided.");
	struct process_result pr = {0};
	if (r == 0)
		r = run(req, command, &pr, &e);
	if (r < 0) {
		snprintf(why, why_size, "%s", e.msg[0] ? e.msg : "the command failed");
		text_result(out, why, 1);
		return;
	}
	if (pr.timed_out)
		snprintf(why, why_size,
			 "timed out: bash has not returned in %lld ms and must be "
			 "restarted",
			 pr.duration_ms);
	/* The reference drops one trailing newline of each stream. */
	if (pr.out_len && pr.out[pr.out_len - 1] == '\n')
		pr.out[--pr.out_len] = '\0';
	if (pr.err_len && pr.err[pr.err_len - 1] == '\n')
		pr.err[--pr.err_len] = '\0';
	if (pr.timed_out)
		text_result(out, why, 1);
	else if (pr.err_len)
		text_result(out, pr.err, 1);
	else
		text_result(out, pr.out ? pr.out : "", 0);
	if (pr.err_len && !pr.timed_out)
		snprintf(why, why_size, "the command wrote to stderr");
	process_result_release(&pr);
}

int api_anthropic_bash(struct http_request *req, struct http_response *res, int *handled,
		       struct err *e)
{
	*handled = 0;
	cJSON *body;
	if (http_json_body(req, &body, e) < 0)
		return err_code(e);
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(body, "name");
	const cJSON *input = cJSON_GetObjectItemCaseSensitive(body, "input");
	int edit =
	    cJSON_IsString(name) && strcmp(name->valuestring, "str_replace_based_edit_tool") == 0;
	if (!cJSON_IsString(name) || (strcmp(name->valuestring, "bash") != 0 && !edit) || !input) {
		cJSON_Delete(body);
		return 0;
	}
	*handled = 1;
	cJSON *out = cJSON_CreateObject();
	if (!out) {
		cJSON_Delete(body);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	cJSON_AddStringToObject(out, "type", "tool_result");
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(body, "id");
	if (cJSON_IsString(id))
		cJSON_AddStringToObject(out, "tool_use_id", id->valuestring);
	char why[ERR_MSG_MAX] = "";
	if (edit)
		api_anthropic_edit(req, input, out, why, sizeof(why));
	else
		bash(req, input, out, why, sizeof(why));
	cJSON_Delete(body);
	if (http_reply_json(res, 200, out, e) < 0)
		return err_code(e);
	if (why[0]) {
		for (char *p = why; *p; p++)
			if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f)
				*p = ' ';
		http_add_header(res, "X-Action-Error", why, NULL);
	}
	return 0;
}
