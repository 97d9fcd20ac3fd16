/* Recordings as the listing, the download and the sidecar see them
 * (desktop.h): read back from their files, so they outlive deskboxd. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/text.h"
#include "common/clock.h"
#include "common/fs.h"
#include "desktop.h"
#include "internal.h"

#define META_MAX    (64u << 10)
#define SIDECAR_MAX (64u << 20)

/* 1 while `rid` is being recorded by this deskboxd. */
static int recording_now(struct desk_obs *o, const char *rid)
{
	pthread_mutex_lock(&o->mu);
	int now = 0;
	for (struct desk_rec *r = o->recs; r; r = r->next)
		if (strcmp(r->id, rid) == 0)
			now = !desk_rec_done(r);
	pthread_mutex_unlock(&o->mu);
	return now;
}

int desk_rec_get(struct desk_obs *o, const char *dir, const char *rid, cJSON **out, struct err *e)
{
	if (!desk_rec_id_ok(rid))
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no recording '%.*s'", UTF8_CUT(rid, 40));
	char path[PATH_MAX], *text;
	size_t len;
	snprintf(path, sizeof(path), "%s/%s.json", dir, rid);
	if (fs_read_file(path, META_MAX, &text, &len, e) < 0) {
		err_clear(e);
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no recording '%s'", rid);
	}
	cJSON *j = cJSON_ParseWithLength(text, len);
	free(text);
	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		return err_set(e, ERR_INTERNAL, EINVAL, "recording '%s': unreadable state", rid);
	}
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "state");
	const cJSON *at = cJSON_GetObjectItemCaseSensitive(j, "started_at");
	if (cJSON_IsString(st) && strcmp(st->valuestring, "recording") == 0) {
		if (recording_now(o, rid)) {
			double started = cJSON_IsNumber(at) ? at->valuedouble : 0;
			cJSON_AddNumberToObject(j, "duration_ms",
						(double)clock_wall_ms() - started);
		} else {
			/* deskboxd stopped while it recorded: the file is cut
			 * at its last fragment, and still plays. */
			cJSON_ReplaceItemInObjectCaseSensitive(j, "state",
							       cJSON_CreateString("interrupted"));
		}
	}
	const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format");
	int webm = cJSON_IsString(fmt) && strcmp(fmt->valuestring, "webm") == 0;
	snprintf(path, sizeof(path), "%s/%s.%s", dir, rid, webm ? "webm" : "mp4");
	struct stat sb;
	cJSON_AddNumberToObject(j, "size", stat(path, &sb) == 0 ? (double)sb.st_size : 0);
	*out = j;
	return 0;
}

static int by_start(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
	double sx = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(x, "started_at"));
	double sy = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(y, "started_at"));
	return sx < sy ? -1 : sx > sy;
}

int desk_rec_list(struct desk_obs *o, const char *dir, cJSON **out, struct err *e)
{
	cJSON *list = cJSON_CreateArray();
	if (!list)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	DIR *d = opendir(dir);
	struct dirent *de;
	cJSON *items[1024];
	size_t n = 0;
	while (d && n < sizeof(items) / sizeof(items[0]) && (de = readdir(d))) {
		char rid[DESK_REC_ID_LEN + 1];
		size_t l = strlen(de->d_name);
		if (l != DESK_REC_ID_LEN + 5 || strcmp(de->d_name + DESK_REC_ID_LEN, ".json") != 0)
			continue;
		memcpy(rid, de->d_name, DESK_REC_ID_LEN);
		rid[DESK_REC_ID_LEN] = '\0';
		cJSON *j;
		struct err e2 = ERR_INIT;
		if (desk_rec_get(o, dir, rid, &j, &e2) == 0)
			items[n++] = j;
	}
	if (d)
		closedir(d);
	qsort(items, n, sizeof(items[0]), by_start);
	for (size_t i = 0; i < n; i++)
		cJSON_AddItemToArray(list, items[i]);
	*out = list;
	return 0;
}

int desk_rec_open(struct desk_obs *o, const char *dir, const char *rid, int *fd, uint64_t *size,
		  const char **mime, struct err *e)
{
	cJSON *j;
	if (desk_rec_get(o, dir, rid, &j, e) < 0)
		return err_code(e);
	const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format");
	int webm = cJSON_IsString(fmt) && strcmp(fmt->valuestring, "webm") == 0;
	cJSON_Delete(j);
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s.%s", dir, rid, webm ? "webm" : "mp4");
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (*fd < 0 || fstat(*fd, &st) < 0) {
		int saved = errno;
		if (*fd >= 0)
			close(*fd);
		return err_sys(e, ERR_NOT_FOUND, saved, "recording '%s' has no file", rid);
	}
	*size = (uint64_t)st.st_size;
	*mime = webm ? "video/webm" : "video/mp4";
	return 0;
}

int desk_rec_actions(struct desk_obs *o, const char *dir, const char *rid, cJSON **out,
		     struct err *e)
{
	cJSON *meta;
	if (desk_rec_get(o, dir, rid, &meta, e) < 0)
		return err_code(e);
	char path[PATH_MAX], *text = NULL;
	size_t len = 0;
	snprintf(path, sizeof(path), "%s/%s.actions.jsonl", dir, rid);
	if (fs_read_file(path, SIDECAR_MAX, &text, &len, e) < 0) {
		cJSON_Delete(meta);
		return err_code(e);
	}
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "id", rid);
	cJSON_AddItemToObject(j, "started_at",
			      cJSON_Duplicate(cJSON_GetObjectItem(meta, "started_at"), 0));
	cJSON_Delete(meta);
	cJSON *acts = cJSON_AddArrayToObject(j, "actions");
	/* Lines as written; a last one cut by a crash is left out. */
	for (char *p = text, *nl; p < text + len && (nl = memchr(p, '\n', text + len - p));
	     p = nl + 1) {
		cJSON *a = cJSON_ParseWithLength(p, (size_t)(nl - p));
		if (a)
			cJSON_AddItemToArray(acts, a);
	}
	free(text);
	*out = j;
	return 0;
}

int desk_rec_delete(struct desk_obs *o, const char *dir, const char *rid, struct err *e)
{
	cJSON *j;
	if (desk_rec_get(o, dir, rid, &j, e) < 0)
		return err_code(e);
	cJSON_Delete(j);
	desk_rec_stop(o, dir, rid, &j, e);
	cJSON_Delete(j);
	err_clear(e);
	static const char *const exts[] = {".mp4", ".webm", ".actions.jsonl", ".json"};
	for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/%s%s", dir, rid, exts[i]);
		if (unlink(path) < 0 && errno != ENOENT)
			return err_sys(e, ERR_INTERNAL, errno, "removing '%s'", path);
	}
	return 0;
}
