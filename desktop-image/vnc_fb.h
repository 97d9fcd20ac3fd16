/* deskbox-vnc's direct view of Xvfb's screen (vnc_fb.c).
 *
 * `Xvfb -fbdir DIR` keeps each screen in a file DIR/Xvfb_screenN, an XWD
 * image (header, window name, colormap, then the pixels) that it maps
 * MAP_SHARED and draws into.  Mapped here read-only, those pixels are the
 * RFB framebuffer itself: the screen is in memory once, not in Xvfb's heap
 * plus a copy of ours, and nothing is read back after a change.  Knows no
 * X connection and no libvncserver.
 */
#ifndef DESKBOX_VNC_FB_H
#define DESKBOX_VNC_FB_H

#include <stddef.h>
#include <stdint.h>

struct vnc_fb {
	uint8_t *map; /* the whole file, PROT_READ; NULL when not mapped */
	size_t len;
	const uint8_t *pixels; /* width * height * 4, 0x00RRGGBB little-endian */
};

/* Maps PATH and checks that it is a width x height screen of 32-bit
 * 0x00RRGGBB pixels, little-endian, rows of exactly width * 4 bytes.
 * 0 on success; -1 (and a line on stderr saying why) otherwise, with
 * nothing mapped. */
int vnc_fb_map(struct vnc_fb *fb, const char *path, int width, int height);

/* Unmaps; a no-op when nothing is mapped. */
void vnc_fb_unmap(struct vnc_fb *fb);

#endif
