/* What the front-ends share (edge/compat_util.c); not used outside
 * server/compat/. */
#ifndef DESKBOX_SERVER_COMPAT_INTERNAL_H
#define DESKBOX_SERVER_COMPAT_INTERNAL_H

#include <stddef.h>

#include "compat.h"
#include "server/api/api.h"
#include "server/files/files.h"
#include "server/process/process.h"

/* Looks sandbox `id` up and enters an operation on it (sandbox_use): on
 * success the caller must compat_release(). */
int compat_enter(struct api *api, const char *id, struct sandbox **sb, struct err *e);
/* A sandbox for a create in deskbox's own form (`spec_json`, the
 * caller's): a warm one from the pool when it matches, else a new one. */
int compat_create(struct api *api, const cJSON *spec_json, struct sandbox **out, struct err *e);
void compat_release(struct sandbox *sb);

/* A command line (`sh -c`) or a piece of code run to its end in sandbox
 * `id`, which is "in use" only while the run starts (a delete kills the
 * run rather than waiting for it).  `env` may be NULL, `cwd` NULL for
 * /workspace, `timeout_ms` 0 for the server's default. */
struct compat_run {
	const char *command; /* sh -c COMMAND; or: */
	int language;	     /* >= 0: code in process_languages[language] */
	const char *code;
	const char *const *env; /* "K=V", NULL-terminated, may be NULL */
	const char *cwd;
	int timeout_ms;
	int merge_stderr;	 /* stderr into stdout, in the order written */
	const char *const *args; /* code: its arguments (at most 16), may be NULL */
};
int compat_run(struct api *api, const char *id, const struct compat_run *run,
	       struct process_result *res, struct err *e);

/* The index in process_languages of `name` ("python", "javascript" and
 * "typescript" and "node" are node, "bash"/"sh"), or -1. */
int compat_language(const char *name);

/* Opens the files root of `sb` (entered) and normalizes `path` (relative
 * ones are under `base`, NULL: /workspace) into `canon` (PATH_MAX). */
int compat_path(struct sandbox *sb, const char *path, const char *base, struct files_root *root,
		char *canon, struct err *e);

/* "K=V" strings for a JSON object of strings (at most `max`; owned by the
 * caller, freed with compat_env_free). */
int compat_env(const cJSON *obj, char ***out, size_t max, struct err *e);
void compat_env_free(char **env);

/* A multipart upload into sandbox req->captures[0] (edge/compat_upload.c),
 * the first member of a front-end's calloc'd state: begin sets the body
 * sink (on failure it frees `u`), the front-end's `on_part` (called with
 * `u`) opens the file with compat_upload_open and writes it with
 * compat_upload_write (quota kept); compat_upload_commit renames it into
 * place.  compat_upload_free calls `free_extra` for the rest of the state. */
struct compat_upload {
	struct sandbox *sb;
	struct files_root root;
	struct http_multipart *mp;
	struct files_upload *fu;			/* the file being written */
	void (*free_extra)(struct compat_upload *u); /* may be NULL */
};
int compat_upload_begin(struct http_request *req, struct compat_upload *u, http_part_fn on_part,
			struct http_body_sink *sink, struct err *e);
int compat_upload_open(struct compat_upload *u, const char *canon, int mode, struct err *e);
int compat_upload_write(struct compat_upload *u, const char *data, size_t size, struct err *e);
int compat_upload_commit(struct compat_upload *u, struct err *e);
void compat_upload_free(struct compat_upload *u);

/* Per front-end: its routes and its error shape. */
extern const struct http_route zeroboot_routes[];
extern const size_t zeroboot_n_routes;
void zeroboot_error(struct http_response *res, int status, const char *message);

extern const struct http_route daytona_routes[];
extern const size_t daytona_n_routes;
void daytona_error(struct http_response *res, int status, const struct err *e);

extern const struct http_route sprites_routes[];
extern const size_t sprites_n_routes;
void sprites_error(struct http_response *res, int status, const struct err *e);

extern const struct http_route opensandbox_routes[];
extern const size_t opensandbox_n_routes;
void opensandbox_error(struct http_response *res, int status, const struct err *e);

#endif
