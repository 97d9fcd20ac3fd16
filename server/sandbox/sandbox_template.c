/* sandbox_template: named sandbox templates, defaults for a create.
 *
 * A template is a JSON object: "image" ("default" or a stored image), "display",
 * "agent_display", "resources" {"cpus","memory_mb","pids_max","disk_mb"},
 * "network", "env", "files" [{"path","content","mode"}] (text content),
 * "startup" ["shell command", …], "timeout_s", "on_timeout", "auto_resume",
 * "restart", "warm_pool" (how many desktops made from it are kept ready,
 * sandbox_pool.c), "isolation" ("container" | "vm").  Any other field is
 * refused, naming it.  POST /v1/sandboxes
 * {"template":N, …} expands it into the create request (the request's own
 * fields win; "env" is merged key by key), validated like any create; once
 * the desktop is up, the files are written as the sandbox's user and the
 * startup commands run one after the other (a failing one fails the create
 * and deletes the sandbox).
 *
 * Templates made through the API are kept in <state>/templates/<name>.json;
 * --templates-dir adds the *.json files of a directory at start (named
 * after the file).  Both can be replaced or deleted through the API; a
 * deleted --templates-dir one comes back at the next start. */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/args.h"
#include "common/cleanup.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/text.h"
#include "server/files/files.h"
#include "server/process/process.h"

#define TEMPLATES_MAX	     256
#define TEMPLATE_FILES_MAX   64
#define TEMPLATE_FILES_BYTES (1u << 20)
#define TEMPLATE_STARTUP_MAX 16
#define TEMPLATE_COMMAND_MAX 4096
#define TEMPLATE_STARTUP_MS  120000

struct template
{
	char name[SANDBOX_TEMPLATE_NAME_MAX + 1];
	cJSON *body;
	struct template *next;
};

struct sandbox_templates {
	char state[4096]; /* the state dir: its images/ are what "image" may name */
	char dir[4096];	  /* <state>/templates */
	pthread_mutex_t mu;
	struct template *list;
	unsigned count;
};

const char *const sandbox_template_fields[] = {
    "image",	 "display", "agent_display", "resources",  "network",	  "env",
    "files",	 "startup", "timeout_s",     "on_timeout", "auto_resume", "restart",
    "warm_pool", "secrets", "isolation",     "root",	   NULL,
};

int sandbox_template_name_ok(const char *name)
{
	size_t n = strlen(name);
	return n > 0 && n <= SANDBOX_TEMPLATE_NAME_MAX && name[0] != '.' && name[0] != '-' &&
	       strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
		   n;
}

static int check_files(const cJSON *files, struct err *e)
{
	static const char *const fields[] = {"path", "content", "mode", NULL};
	if (!cJSON_IsArray(files) || cJSON_GetArraySize(files) > TEMPLATE_FILES_MAX)
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'files' must be an array of at most %d", TEMPLATE_FILES_MAX);
	size_t total = 0;
	const cJSON *f;
	cJSON_ArrayForEach(f, files)
	{
		const char *path, *content;
		int64_t mode;
		if (!cJSON_IsObject(f) || args_only(f, "files[]", fields, e) < 0 ||
		    args_string(f, "path", 4095, ARGS_REQUIRED, &path, e) < 0 ||
		    args_string(f, "content", TEMPLATE_FILES_BYTES, ARGS_REQUIRED, &content, e) <
			0 ||
		    args_int(f, "mode", 0, 07777, 0644, 0, &mode, e) < 0)
			return e->kind ? err_wrap(e, "files")
				       : err_set(e, ERR_INVALID, EINVAL,
						 "each of 'files' must be an object");
		char canon[4096];
		if (files_path_normalize(path, strlen(path), canon, sizeof(canon), e) < 0)
			return err_wrap(e, "files");
		total += strlen(content);
	}
	if (total > TEMPLATE_FILES_BYTES)
		return err_set(e, ERR_INVALID, E2BIG, "files: more than %u bytes in all",
			       TEMPLATE_FILES_BYTES);
	return 0;
}

static int check_startup(const cJSON *startup, struct err *e)
{
	if (!cJSON_IsArray(startup) || cJSON_GetArraySize(startup) > TEMPLATE_STARTUP_MAX)
		return err_set(e, ERR_INVALID, EINVAL,
			       "field 'startup' must be an array of at most %d commands",
			       TEMPLATE_STARTUP_MAX);
	const cJSON *c;
	cJSON_ArrayForEach(c, startup)
	{
		if (!cJSON_IsString(c) || !c->valuestring[0] ||
		    strlen(c->valuestring) > TEMPLATE_COMMAND_MAX)
			return err_set(e, ERR_INVALID, EINVAL,
				       "each of 'startup' must be a command of 1-%d bytes",
				       TEMPLATE_COMMAND_MAX);
	}
	return 0;
}

/* The create-request form of template fields `t` (a new object). */
static cJSON *create_form(const cJSON *t, struct err *e)
{
	static const char *const res_fields[] = {"cpus", "memory_mb", "pids_max", "disk_mb", NULL};
	cJSON *req = cJSON_CreateObject();
	const cJSON *it;
	cJSON_ArrayForEach(it, t)
	{
		if (strcmp(it->string, "resources") && strcmp(it->string, "files") &&
		    strcmp(it->string, "startup") && strcmp(it->string, "warm_pool"))
			cJSON_AddItemToObject(req, it->string, cJSON_Duplicate(it, 1));
	}
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(t, "resources");
	if (res && !cJSON_IsObject(res)) {
		cJSON_Delete(req);
		err_set(e, ERR_INVALID, EINVAL, "field 'resources' must be an object");
		return NULL;
	}
	double cpus;
	if (res && (args_only(res, "resources", res_fields, e) < 0 ||
		    args_double(res, "cpus", 0.001, 256, 0, 0, &cpus, e) < 0)) {
		cJSON_Delete(req);
		return NULL;
	}
	cJSON_ArrayForEach(it, res)
	{
		if (strcmp(it->string, "cpus") == 0)
			cJSON_AddNumberToObject(req, "cpu_millis", (double)(int64_t)(cpus * 1000));
		else
			cJSON_AddItemToObject(req, it->string, cJSON_Duplicate(it, 1));
	}
	return req;
}

/* Checks a whole template: its fields, its image, and that its create
 * form is a valid create. */
static int check_template(const struct sandbox_templates *ts, const cJSON *t, struct err *e)
{
	if (!cJSON_IsObject(t))
		return err_set(e, ERR_INVALID, EINVAL, "a template must be an object");
	if (args_only(t, NULL, sandbox_template_fields, e) < 0)
		return err_code(e);
	int64_t pool;
	if (args_int(t, "warm_pool", 0, POOL_TEMPLATE_MAX, 0, 0, &pool, e) < 0)
		return err_code(e);
	const char *image;
	if (args_string(t, "image", 256, 0, &image, e) < 0)
		return err_code(e);
	/* A stored image must be there and usable now; a create checks again
	 * (it may be deleted meanwhile). */
	char lower[4096];
	if (image && strcmp(image, "default") != 0) {
		if (!image_name_valid(image))
			return err_set(e, ERR_INVALID, EINVAL, "no image '%.*s'",
				       UTF8_CUT(image, 64));
		if (image_lookup(ts->state, image, lower, sizeof(lower), e) < 0) {
			e->kind = ERR_INVALID; /* a field of the request, not its target */
			return err_wrap(e, "field 'image'");
		}
	}
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "files");
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(t, "startup");
	if ((f && !cJSON_IsNull(f) && check_files(f, e) < 0) ||
	    (s && !cJSON_IsNull(s) && check_startup(s, e) < 0))
		return err_code(e);
	cJSON *req = create_form(t, e);
	if (!req)
		return err_code(e);
	struct sandbox_spec spec;
	int r = sandbox_spec_parse(req, &spec, e);
	cJSON_Delete(req);
	if (r == 0)
		sandbox_spec_release(&spec);
	return r;
}

static struct template *find(struct sandbox_templates *t, const char *name)
{
	for (struct template *p = t->list; p; p = p->next)
		if (strcmp(p->name, name) == 0)
			return p;
	return NULL;
}

static unsigned warm_pool_of(const cJSON *body)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, "warm_pool");
	return cJSON_IsNumber(v) && v->valuedouble > 0 ? (unsigned)v->valuedouble : 0;
}

/* Refuses a warm_pool that would take the templates' pools together past
 * POOL_TEMPLATES_TOTAL; t->mu held. */
static int pools_fit(struct sandbox_templates *t, const char *name, const cJSON *body,
		     struct err *e)
{
	unsigned others = 0, want = warm_pool_of(body);
	for (struct template *p = t->list; p; p = p->next)
		if (strcmp(p->name, name) != 0)
			others += warm_pool_of(p->body);
	if (want && others + want > POOL_TEMPLATES_TOTAL)
		return err_set(e, ERR_INVALID, E2BIG,
			       "field 'warm_pool': the templates' warm pools keep at most %d "
			       "desktops in all, and other templates keep %u",
			       POOL_TEMPLATES_TOTAL, others);
	return 0;
}

/* Adds or replaces `name` (takes `body`); t->mu held. */
static int store(struct sandbox_templates *t, const char *name, cJSON *body, struct err *e)
{
	if (pools_fit(t, name, body, e) < 0) {
		cJSON_Delete(body);
		return err_code(e);
	}
	struct template *p = find(t, name);
	if (p) {
		cJSON_Delete(p->body);
		p->body = body;
		return 0;
	}
	if (t->count >= TEMPLATES_MAX) {
		cJSON_Delete(body);
		return err_set(e, ERR_LIMIT, EMLINK, "at most %d templates", TEMPLATES_MAX);
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		cJSON_Delete(body);
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->body = body;
	p->next = t->list;
	t->list = p;
	t->count++;
	return 0;
}

/* Reads the *.json templates of `dir` (a missing dir is none). */
static void load_dir(struct sandbox_templates *t, const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		size_t n = strlen(de->d_name);
		char name[SANDBOX_TEMPLATE_NAME_MAX + 1], path[8192];
		if (n <= 5 || n - 5 > SANDBOX_TEMPLATE_NAME_MAX ||
		    strcmp(de->d_name + n - 5, ".json") != 0)
			continue;
		snprintf(name, sizeof(name), "%.*s", (int)(n - 5), de->d_name);
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		struct err e = ERR_INIT;
		_cleanup_free_ char *text = NULL;
		cJSON *j = NULL;
		if (!sandbox_template_name_ok(name))
			err_set(&e, ERR_INVALID, EINVAL, "not a template name");
		else if (fs_read_file(path, 1 << 21, &text, NULL, &e) == 0 &&
			 !(j = cJSON_Parse(text)))
			err_set(&e, ERR_INVALID, EINVAL, "not JSON");
		if (j && check_template(t, j, &e) < 0) {
			cJSON_Delete(j);
			j = NULL;
		}
		if (j && store(t, name, j, &e) == 0) /* store() frees j on failure */
			continue;
		log_msg(LOG_LEVEL_WARN, "template '%s': %s", path, e.msg);
	}
	if (d)
		closedir(d);
}

int sandbox_templates_open(struct sandbox_templates **out, const char *state_dir,
			   const char *extra_dir, struct err *e)
{
	struct sandbox_templates *t = calloc(1, sizeof(*t));
	if (!t)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	pthread_mutex_init(&t->mu, NULL);
	snprintf(t->state, sizeof(t->state), "%s", state_dir);
	snprintf(t->dir, sizeof(t->dir), "%s/templates", state_dir);
	if (fs_mkdir_p(t->dir, 0700, e) < 0) {
		free(t);
		return err_code(e);
	}
	if (extra_dir)
		load_dir(t, extra_dir);
	load_dir(t, t->dir); /* the API's win over the directory's */
	*out = t;
	return 0;
}

void sandbox_templates_free(struct sandbox_templates *t)
{
	if (!t)
		return;
	while (t->list) {
		struct template *p = t->list;
		t->list = p->next;
		cJSON_Delete(p->body);
		free(p);
	}
	pthread_mutex_destroy(&t->mu);
	free(t);
}

/* Drops members whose value is null, in `j` and its objects: null means
 * "not given", as at create, so the template keeps only what it sets. */
static void strip_nulls(cJSON *j)
{
	for (cJSON *it = j ? j->child : NULL, *next; it; it = next) {
		next = it->next;
		if (cJSON_IsNull(it))
			cJSON_Delete(cJSON_DetachItemViaPointer(j, it));
		else if (cJSON_IsObject(it))
			strip_nulls(it);
	}
}

int sandbox_template_put(struct sandbox_templates *t, const char *name, const cJSON *given,
			 struct err *e)
{
	if (!sandbox_template_name_ok(name))
		return err_set(e, ERR_INVALID, EINVAL,
			       "template name '%.*s' must be 1-64 of A-Z a-z 0-9 . _ - and not "
			       "start with '.' or '-'",
			       UTF8_CUT(name, 80));
	if (check_template(t, given, e) < 0)
		return err_wrap(e, "template '%s'", name);
	cJSON *body = cJSON_Duplicate(given, 1);
	strip_nulls(body);
	_cleanup_free_ char *text = body ? cJSON_PrintUnformatted(body) : NULL;
	char path[8192];
	snprintf(path, sizeof(path), "%s/%s.json", t->dir, name);
	pthread_mutex_lock(&t->mu);
	int r = !text			      ? err_set(e, ERR_INTERNAL, ENOMEM, "out of memory")
		: pools_fit(t, name, body, e) ? err_code(e)
					      : fs_write_atomic(path, text, strlen(text), 0600, e);
	if (r == 0) {
		r = store(t, name, body, e);
		body = NULL;
	}
	pthread_mutex_unlock(&t->mu);
	cJSON_Delete(body);
	return r;
}

int sandbox_template_get(struct sandbox_templates *t, const char *name, cJSON **out, struct err *e)
{
	pthread_mutex_lock(&t->mu);
	struct template *p = find(t, name);
	*out = p ? cJSON_Duplicate(p->body, 1) : NULL;
	pthread_mutex_unlock(&t->mu);
	if (!p)
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no template '%.*s'", UTF8_CUT(name, 80));
	cJSON_AddStringToObject(*out, "name", name);
	return 0;
}

cJSON *sandbox_templates_json(struct sandbox_templates *t)
{
	cJSON *arr = cJSON_CreateArray();
	pthread_mutex_lock(&t->mu);
	for (struct template *p = t->list; p; p = p->next) {
		cJSON *j = cJSON_Duplicate(p->body, 1);
		cJSON_AddStringToObject(j, "name", p->name);
		cJSON_AddItemToArray(arr, j);
	}
	pthread_mutex_unlock(&t->mu);
	return arr;
}

int sandbox_template_delete(struct sandbox_templates *t, const char *name, struct err *e)
{
	pthread_mutex_lock(&t->mu);
	struct template **pp = &t->list;
	while (*pp && strcmp((*pp)->name, name) != 0)
		pp = &(*pp)->next;
	struct template *p = *pp;
	if (p) {
		*pp = p->next;
		t->count--;
		char path[8192];
		snprintf(path, sizeof(path), "%s/%s.json", t->dir, name);
		unlink(path);
	}
	pthread_mutex_unlock(&t->mu);
	if (!p)
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no template '%.*s'", UTF8_CUT(name, 80));
	cJSON_Delete(p->body);
	free(p);
	return 0;
}

/* Merges `over` into `base` (both objects): "env" and "resources" key by
 * key, anything else replaced. */
static void merge(cJSON *base, const cJSON *over)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, over)
	{
		cJSON *old = cJSON_GetObjectItemCaseSensitive(base, it->string);
		if (old && cJSON_IsObject(old) && cJSON_IsObject(it) &&
		    (!strcmp(it->string, "env") || !strcmp(it->string, "resources"))) {
			const cJSON *kv;
			cJSON_ArrayForEach(kv, it)
			{
				cJSON_DeleteItemFromObjectCaseSensitive(old, kv->string);
				cJSON_AddItemToObject(old, kv->string, cJSON_Duplicate(kv, 1));
			}
			continue;
		}
		cJSON_DeleteItemFromObjectCaseSensitive(base, it->string);
		cJSON_AddItemToObject(base, it->string, cJSON_Duplicate(it, 1));
	}
}

/* A create's own limit fields (memory_mb, pids_max, disk_mb, cpu_millis)
 * in a request naming a template become its "resources" overrides. */
static void resources_from_create(cJSON *over)
{
	static const char *const keys[] = {"memory_mb", "pids_max", "disk_mb", "cpu_millis"};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(over, keys[i]);
		if (!v)
			continue;
		cJSON *res = cJSON_GetObjectItemCaseSensitive(over, "resources");
		if (!cJSON_IsObject(res)) {
			cJSON_DeleteItemFromObjectCaseSensitive(over, "resources");
			res = cJSON_AddObjectToObject(over, "resources");
		}
		if (i == 3 && cJSON_IsNumber(v)) {
			/* cpus in resources; 0 (no limit) has no cpus form */
			if (v->valuedouble > 0)
				cJSON_AddNumberToObject(res, "cpus", v->valuedouble / 1000);
			cJSON_Delete(v);
		} else {
			cJSON_AddItemToObject(res, keys[i], v);
		}
	}
}

int sandbox_template_expand(struct sandbox_templates *t, const cJSON *req, cJSON **create,
			    struct sandbox_template_extra *extra, struct err *e)
{
	const char *name;
	if (args_string(req, "template", SANDBOX_TEMPLATE_NAME_MAX + 8, ARGS_REQUIRED, &name, e) <
	    0)
		return err_code(e);
	cJSON *over = cJSON_Duplicate(req, 1);
	cJSON_DeleteItemFromObjectCaseSensitive(over, "template");
	resources_from_create(over);
	cJSON *merged = NULL;
	int r = args_only(over, NULL, sandbox_template_fields, e);
	if (r == 0 && cJSON_GetObjectItemCaseSensitive(over, "warm_pool"))
		r = err_set(
		    e, ERR_INVALID, EINVAL,
		    "field 'warm_pool' belongs to a template (POST /v1/templates), not to a "
		    "create");
	if (r == 0 && sandbox_template_get(t, name, &merged, e) < 0)
		r = err_set(e, ERR_INVALID, ENOENT, "no template '%.*s'", UTF8_CUT(name, 80));
	if (r == 0) {
		cJSON_DeleteItemFromObjectCaseSensitive(merged, "name");
		merge(merged, over);
		r = check_template(t, merged, e);
	}
	if (r == 0 && !(*create = create_form(merged, e)))
		r = err_code(e);
	if (r == 0) {
		extra->files = cJSON_DetachItemFromObjectCaseSensitive(merged, "files");
		extra->startup = cJSON_DetachItemFromObjectCaseSensitive(merged, "startup");
	}
	cJSON_Delete(over);
	cJSON_Delete(merged);
	return r < 0 ? err_wrap(e, "template '%.*s'", UTF8_CUT(name, 80)) : 0;
}

void sandbox_template_extra_release(struct sandbox_template_extra *x)
{
	cJSON_Delete(x->files);
	cJSON_Delete(x->startup);
	x->files = x->startup = NULL;
}

/* Writes the template's files into the sandbox as its user. */
static int place_files(struct sandbox *sb, const cJSON *files, struct err *e)
{
	struct files_root root = {.fd = -1};
	if (sandbox_open_root(sb, &root, e) < 0)
		return err_code(e);
	int r = 0;
	const cJSON *f;
	cJSON_ArrayForEach(f, files)
	{
		const char *path =
		    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "path"));
		const char *text =
		    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "content"));
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(f, "mode");
		char canon[4096];
		struct files_upload *u = NULL;
		r = files_path_normalize(path, strlen(path), canon, sizeof(canon), e);
		r = r
			?: files_upload_begin(&root, canon, 1,
					      cJSON_IsNumber(m) ? m->valueint : 0644, &u, e);
		r = r ?: files_upload_write(u, text, strlen(text), e);
		r = r ?: files_upload_commit(u, e);
		files_upload_free(u);
		if (r < 0) {
			err_wrap(e, "placing '%.*s'", UTF8_CUT(path, 200));
			break;
		}
	}
	close(root.fd);
	return r;
}

/* Runs `cmd` with sh -c as the sandbox's user; its exit code. */
static int run_one(struct sandbox *sb, const char *cmd, struct process_result *pr, struct err *e)
{
	const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	struct process_opts o = {
	    .argv = argv, .timeout_ms = TEMPLATE_STARTUP_MS, .max_output = 4096};
	struct process_run *run;
	if (sandbox_use(sb, 0, NULL, e) < 0)
		return err_code(e);
	int r = process_start(sb->procs, &o, &run, e);
	sandbox_unuse(sb);
	if (r < 0)
		return r;
	while (!process_step(run, 1000, NULL, NULL))
		;
	r = process_finish(run, pr, e);
	process_run_free(run);
	return r;
}

int sandbox_template_apply(struct sandbox *sb, const struct sandbox_template_extra *x,
			   struct err *e)
{
	if (x->files && place_files(sb, x->files, e) < 0)
		return err_wrap(e, "template files");
	const cJSON *c;
	int i = 0;
	cJSON_ArrayForEach(c, x->startup)
	{
		struct process_result pr;
		i++;
		if (run_one(sb, c->valuestring, &pr, e) < 0)
			return err_wrap(e, "startup command %d", i);
		int code = pr.exit_code;
		char tail[201];
		snprintf(tail, sizeof(tail), "%s", pr.err && pr.err_len ? pr.err : "");
		process_result_release(&pr);
		if (code != 0)
			return err_set(e, ERR_INVALID, ECHILD,
				       "startup command %d ('%.*s') exited with %d%s%s", i,
				       UTF8_CUT(c->valuestring, 80), code, tail[0] ? ": " : "",
				       tail);
	}
	return 0;
}
