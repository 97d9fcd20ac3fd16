/* runtime_vm_image: a stored image in a VM.  Its own /usr is in the
 * overlay the guest gets as its root (no /usr share), and deskbox's parts
 * in the guest are the image binaries (build/image: linked against their
 * own libraries at /.deskbox/lib, as in a container) with the guest's
 * agent and relay, from <vm share>-image (make vm).  The agent and relay
 * run on the image's python3; an image without one, or one that needs the
 * host's desktop (no Xvfb or openbox: /.deskbox/host in its bundle), is
 * refused with 501 naming what it lacks. */
#include "runtime.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

int runtime_vm_image_share(const cJSON *config, const char *rootfs, const char *share,
			   char *out, size_t size, struct err *e)
{
	const cJSON *m;
	cJSON_ArrayForEach(m, cJSON_GetObjectItem(config, "mounts"))
	{
		const char *d = cJSON_GetStringValue(cJSON_GetObjectItem(m, "destination"));
		if (d && !strcmp(d, IMAGE_HOST_DIR))
			return err_set(e, ERR_NOT_IMPLEMENTED, ENOTSUP,
				       "isolation 'vm': this image lacks Xvfb or openbox, and the "
				       "host's desktop is not shared with a VM yet (docs/isolation.md)");
	}
	char py[PATH_MAX];
	struct stat st;
	snprintf(py, sizeof(py), "%s/usr/bin/python3", rootfs);
	if (lstat(py, &st) < 0)
		return err_set(e, ERR_NOT_IMPLEMENTED, ENOTSUP,
			       "isolation 'vm': this image has no /usr/bin/python3, which the "
			       "VM's exec agent runs on (docs/isolation.md)");
	snprintf(out, size, "%s-image", share);
	if (stat(out, &st) < 0 || !S_ISDIR(st.st_mode))
		return err_set(e, ERR_NOT_IMPLEMENTED, ENOENT,
			       "isolation 'vm' needs '%s' for a stored image (make vm)", out);
	return 0;
}
