/* Xvfb's screen file, mapped read-only (see vnc_fb.h). */
#include <X11/XWDFile.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vnc_fb.h"
#include "vnc_util.h"

/* XWD header fields, in file order (CARD32, big-endian on disk). */
enum {
	F_HEADER_SIZE,
	F_FILE_VERSION,
	F_PIXMAP_FORMAT,
	F_PIXMAP_DEPTH,
	F_PIXMAP_WIDTH,
	F_PIXMAP_HEIGHT,
	F_XOFFSET,
	F_BYTE_ORDER,
	F_BITMAP_UNIT,
	F_BITMAP_BIT_ORDER,
	F_BITMAP_PAD,
	F_BITS_PER_PIXEL,
	F_BYTES_PER_LINE,
	F_VISUAL_CLASS,
	F_RED_MASK,
	F_GREEN_MASK,
	F_BLUE_MASK,
	F_BITS_PER_RGB,
	F_COLORMAP_ENTRIES,
	F_NCOLORS,
	F_N_FIELDS = sz_XWDheader / 4
};

#define ZPIXMAP	  2 /* X.h's ZPixmap */
#define LSB_FIRST 0 /* X.h's LSBFirst */
/* Xvfb's header plus window name is 160 bytes; anything far larger is
 * not a screen file. */
#define MAX_HEADER (64 * 1024)
#define MAX_COLORS 65536

static uint32_t field(const uint8_t *h, int i)
{
	const uint8_t *p = h + 4 * i;
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The offset of the pixels when the header describes our screen, 0 when
 * it does not.  SECURITY: the sizes come from a file; every product is
 * checked against the file's length before it is used. */
static size_t pixel_offset(const uint8_t *h, size_t len, int width, int height)
{
	uint32_t hs = field(h, F_HEADER_SIZE), nc = field(h, F_NCOLORS);
	size_t stride = (size_t)width * 4;
	if (hs < sz_XWDheader || hs > MAX_HEADER || nc > MAX_COLORS ||
	    field(h, F_FILE_VERSION) != XWD_FILE_VERSION || field(h, F_PIXMAP_FORMAT) != ZPIXMAP ||
	    field(h, F_PIXMAP_DEPTH) != 24 || field(h, F_PIXMAP_WIDTH) != (uint32_t)width ||
	    field(h, F_PIXMAP_HEIGHT) != (uint32_t)height || field(h, F_XOFFSET) != 0 ||
	    field(h, F_BYTE_ORDER) != LSB_FIRST || field(h, F_BITS_PER_PIXEL) != 32 ||
	    field(h, F_BYTES_PER_LINE) != stride || field(h, F_RED_MASK) != 0xff0000 ||
	    field(h, F_GREEN_MASK) != 0xff00 || field(h, F_BLUE_MASK) != 0xff)
		return 0;
	/* width, height <= 8192 (checked by the caller): no overflow. */
	size_t off = (size_t)hs + (size_t)nc * sz_XWDColor;
	if (off > len || len - off < stride * (size_t)height)
		return 0;
	return off;
}

int vnc_fb_map(struct vnc_fb *fb, const char *path, int width, int height)
{
	memset(fb, 0, sizeof(*fb));
	if (width <= 0 || height <= 0 || width > 8192 || height > 8192)
		return -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		vnc_say("cannot open the screen file '%s': %s", path, strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < sz_XWDheader) {
		vnc_say("'%s' is not a screen file", path);
		close(fd);
		return -1;
	}
	size_t len = (size_t)st.st_size;
	/* MAP_SHARED: Xvfb's drawing shows through; PROT_READ: nothing here
	 * can write to the X server's screen. */
	uint8_t *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		vnc_say("cannot map '%s': %s", path, strerror(errno));
		return -1;
	}
	size_t off = pixel_offset(map, len, width, height);
	if (!off) {
		vnc_say("'%s' is not a %dx%d 32-bit 0x00RRGGBB screen", path, width, height);
		munmap(map, len);
		return -1;
	}
	fb->map = map;
	fb->len = len;
	fb->pixels = map + off;
	return 0;
}

void vnc_fb_unmap(struct vnc_fb *fb)
{
	if (fb->map)
		munmap(fb->map, fb->len);
	memset(fb, 0, sizeof(*fb));
}
