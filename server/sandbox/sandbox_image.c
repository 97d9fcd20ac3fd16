/* sandbox_image: stored images as the registry sees them (server/runtime/
 * runtime.h has the images themselves): which image a sandbox's overlay
 * uses, the check at create, and deleting an image only while no sandbox
 * names it.  The registry's lock orders the two: a create checks its image
 * and is listed under it, a delete looks for users and takes the image out
 * of its name under it. */
#include "internal.h"

#include <errno.h>
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
