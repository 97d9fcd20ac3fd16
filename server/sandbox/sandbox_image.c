/* sandbox_image: stored images as the registry sees them (server/runtime/
 * runtime.h has the images themselves): which image a sandbox's overlay
 * uses, the check at create, and deleting an image only while no sandbox
 * names it.  The registry's lock orders the two: a create checks its image
 * and is listed under it, a delete looks for users and takes the image out
 * of its name under it. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

#include "common/fs.h"

static int is_default(const char *name)
{
	return !name[0] || strcmp(name, IMAGE_DEFAULT) == 0;
}

int sandbox_image_check(struct sandboxes *s, const char *name, struct err *e)
{
	char lower[PATH_MAX];
	if (is_default(name))
		return 0;
	if (!s->cfg.image_bin_dir)
		return err_set(e, ERR_INVALID, ENOENT,
			       "image '%s': deskboxd has no image binaries (build/image), only the "
			       "default image works",
			       name);
	if (image_lookup(s->cfg.state_dir, name, lower, sizeof(lower), e) < 0)
		return err_code(e);
	if (!s->cfg.userns_base && image_host_parts(lower))
		return err_set(e, ERR_INVALID, EPERM, NO_USERNS_HOST_DESKTOP, name);
	return 0;
}

int sandbox_image_lower(const struct sandbox *sb, char *lower, size_t size, struct err *e)
{
	if (is_default(sb->spec.image)) {
		snprintf(lower, size, "%s", sb->owner->lower);
		return 0;
	}
	return image_lookup(sb->owner->cfg.state_dir, sb->spec.image, lower, size, e);
}

char **sandbox_image_env(const struct sandbox *sb)
{
	cJSON *m = NULL;
	struct err e = ERR_INIT;
	if (is_default(sb->spec.image) ||
	    image_get(sb->owner->cfg.state_dir, sb->spec.image, &m, &e) < 0)
		return NULL;
	const cJSON *env =
	    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "config"), "env");
	int n = cJSON_GetArraySize(env);
	char **out = n > 0 ? calloc((size_t)n + 1, sizeof(*out)) : NULL;
	size_t k = 0;
	const cJSON *kv, *list = out ? env : NULL;
	cJSON_ArrayForEach(kv, list)
	{
		if (k < SANDBOX_IMAGE_ENV_MAX && cJSON_IsString(kv) &&
		    strchr(kv->valuestring, '=') && kv->valuestring[0] != '=' &&
		    (out[k] = strdup(kv->valuestring)))
			k++;
	}
	cJSON_Delete(m);
	return out;
}

void sandbox_image_env_free(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}

/* How many listed sandboxes (any status, pool members too) use `name`.
 * With s->mu held. */
static unsigned users(struct sandboxes *s, const char *name)
{
	unsigned n = 0;
	for (struct sandbox *sb = s->list; sb; sb = sb->next)
		n += strcmp(sb->spec.image[0] ? sb->spec.image : IMAGE_DEFAULT, name) == 0;
	return n;
}

static void add_users(struct sandboxes *s, cJSON *m)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(m, "name");
	if (cJSON_IsString(name))
		cJSON_AddNumberToObject(m, "sandboxes", users(s, name->valuestring));
}

cJSON *sandbox_images_json(struct sandboxes *s)
{
	cJSON *arr = image_list(s->cfg.state_dir);
	cJSON *m;
	pthread_mutex_lock(&s->mu);
	cJSON_ArrayForEach(m, arr) add_users(s, m);
	pthread_mutex_unlock(&s->mu);
	return arr;
}

int sandbox_image_get(struct sandboxes *s, const char *name, cJSON **out, struct err *e)
{
	if (image_get(s->cfg.state_dir, name, out, e) < 0)
		return err_code(e);
	pthread_mutex_lock(&s->mu);
	add_users(s, *out);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

int sandbox_image_delete(struct sandboxes *s, const char *name, struct err *e)
{
	char trash[PATH_MAX] = "";
	pthread_mutex_lock(&s->mu);
	unsigned n = image_name_valid(name) ? users(s, name) : 0;
	int r = n ? err_set(e, ERR_CONFLICT, EBUSY,
			    "image '%s' is used by %u sandbox%s: delete them first", name, n,
			    n == 1 ? "" : "es")
		  : image_remove(s->cfg.state_dir, name, trash, sizeof(trash), e);
	pthread_mutex_unlock(&s->mu);
	/* Out of its name already: removing a big tree must not hold up
	 * every other sandbox operation. */
	if (r == 0 && trash[0] && fs_remove_tree(trash, e) < 0)
		return err_code(e);
	return r;
}

int sandbox_image_import(struct sandboxes *s, const struct image_import *im, cJSON **out,
			 struct err *e)
{
	return image_import_oci(s->cfg.state_dir, im, out, e);
}

int sandbox_image_build(struct sandboxes *s, const char *name, const char *mirror, struct err *e)
{
	return image_build_start(s->cfg.state_dir, name, mirror, e);
}

struct build_range {
	struct sandboxes *s;
	uint32_t base;
};

static void build_over(void *cls)
{
	struct build_range *br = cls;
	sandbox_userns_release(br->s, br->base);
	pthread_mutex_lock(&br->s->mu);
	br->s->builds--;
	pthread_mutex_unlock(&br->s->mu);
	free(br);
}

int sandbox_image_dockerfile(struct sandboxes *s, const char *name, const char *text, size_t len,
			     const char *context, const char *const *build_args, unsigned timeout_s,
			     struct err *e)
{
	char uploaded[PATH_MAX];
	if (image_name_valid(name))
		image_context_path(s->cfg.state_dir, name, uploaded, sizeof(uploaded));
	else
		uploaded[0] = '\0';
	int owned = !context && uploaded[0] && access(uploaded, F_OK) == 0;
	struct build_range *br = calloc(1, sizeof(*br));
	if (!br)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	br->s = s;
	if (sandbox_userns_claim(s, &br->base, e) < 0) {
		free(br);
		return err_code(e);
	}
	pthread_mutex_lock(&s->mu);
	s->builds++;
	pthread_mutex_unlock(&s->mu);
	struct image_dockerfile o = {
	    .state_dir = s->cfg.state_dir,
	    .name = name,
	    .text = text,
	    .len = len,
	    .context = owned ? uploaded : context,
	    .context_owned = owned,
	    .build_args = build_args,
	    .timeout_s = timeout_s,
	    .rt = s->rt,
	    .host_base = br->base,
	    .done = build_over,
	    .done_cls = br,
	};
	if (image_dockerfile_start(&o, e) < 0) {
		build_over(br);
		return err_code(e);
	}
	return 0;
}

int sandbox_image_building(struct sandboxes *s, const char *name)
{
	return image_name_valid(name) && image_building(s->cfg.state_dir, name);
}

int sandbox_image_build_log(struct sandboxes *s, const char *name, int *fd, struct err *e)
{
	char p[PATH_MAX];
	if (!image_name_valid(name))
		return err_set(e, ERR_NOT_FOUND, ENOENT, "no image '%.64s'", name);
	image_build_log_path(s->cfg.state_dir, name, p, sizeof(p));
	*fd = open(p, O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		return err_set(e, ERR_NOT_FOUND, ENOENT,
			       "image '%s' has no build log (it was not built from a Dockerfile)",
			       name);
	return 0;
}

int sandbox_image_context_begin(struct sandboxes *s, const char *name, char *tmp, size_t size,
				int *fd, struct err *e)
{
	if (!image_name_valid(name) || strcmp(name, IMAGE_DEFAULT) == 0)
		return err_set(e, ERR_INVALID, EINVAL,
			       "the image name must match [a-z0-9][a-z0-9._-]{0,62} (not default)");
	char final[PATH_MAX];
	image_context_path(s->cfg.state_dir, name, final, sizeof(final));
	char *slash = strrchr(final, '/');
	*slash = '\0';
	if (fs_mkdir_p(final, 0755, e) < 0)
		return err_code(e);
	/* .tmp-: what images_recover() removes after a crash. */
	snprintf(tmp, size, "%s/.tmp-context-%s-XXXXXX", final, name);
	*fd = mkostemp(tmp, O_CLOEXEC);
	if (*fd < 0)
		return err_sys(e, ERR_INTERNAL, errno, "creating '%s'", tmp);
	return 0;
}

int sandbox_image_context_commit(struct sandboxes *s, const char *name, const char *tmp,
				 struct err *e)
{
	char final[PATH_MAX];
	image_context_path(s->cfg.state_dir, name, final, sizeof(final));
	if (rename(tmp, final) < 0) {
		int saved = errno;
		unlink(tmp);
		return err_sys(e, ERR_INTERNAL, saved, "storing the build context");
	}
	return 0;
}
