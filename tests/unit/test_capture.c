/* Live test of the capture bridge against a real Xvfb + x11vnc on the host:
 * mirroring, change detection, Unicode typing into xterm, bridge death.
 * Skips (77) when Xvfb, x11vnc or xterm are missing. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <X11/Xlib.h>

#include "capture/capture.h"
#include "tests/harness.h"
#include "tests/lib/xlive.h"

#define W XLIVE_W
#define H XLIVE_H

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int send_seq(struct capture *c, const struct input_seq *s)
{
	struct err e = ERR_INIT;
	int r = capture_send(c, s->ev, s->n, &e);
	if (r < 0)
		printf("# capture_send: %s\n", e.msg);
	return r;
}

/* Pixel (x, y) of a full-screen snapshot as 0xRRGGBB. */
static uint32_t pixel(const uint8_t *img, int x, int y)
{
	const uint8_t *p = img + ((size_t)y * W + (size_t)x) * 4;
	return (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

int main(int argc, char **argv)
{
	if (!xlive_in_path("x11vnc") || !xlive_in_path("xterm"))
		skip_all("x11vnc or xterm not installed");
	struct xlive xl;
	xlive_find_build(&xl, argv[0]);
	if (access(xl.bridge, X_OK) != 0)
		skip_all("deskbox-bridge not built next to the test (set BUILD)");
	const char *why;
	if (xlive_start(&xl, "dbx-capture", NULL, &why) < 0)
		skip_all(why);
	char *display = xl.display, *bridge = xl.bridge;

	char sock[PATH_MAX];
	snprintf(sock, sizeof(sock), "%s/vnc.sock", xl.tmpdir);
	char *vnc[] = {"x11vnc", "-display", display,	 "-unixsock", sock,    "-rfbport",
		       "0",	 "-shared",  "-forever", "-nopw",     "-norc", "-quiet",
		       "-safer", "-nocmds",  "-nonap",	 NULL,	      NULL,    NULL,
		       NULL,	 NULL,	     NULL,	 NULL,	      NULL,    NULL};
	/* DBX_X11VNC_EXTRA="-defer 1 -wait 1" etc. (up to eight words) for
	 * measuring other pacing. */
	char extra[256] = "";
	if (getenv("DBX_X11VNC_EXTRA")) {
		snprintf(extra, sizeof(extra), "%s", getenv("DBX_X11VNC_EXTRA"));
		size_t k = 15;
		for (char *tok = strtok(extra, " "); tok && k < 23; tok = strtok(NULL, " "))
			vnc[k++] = tok;
	}
	/* DBX_VNC_SERVER=deskbox: the same test against deskbox-vnc (built
	 * next to the bridge) instead of x11vnc. */
	char *dvnc_argv[] = {xl.vnc, "-display", display, sock, NULL};
	const char *server = getenv("DBX_VNC_SERVER");
	int deskbox = server && !strcmp(server, "deskbox");
	if (deskbox && access(xl.vnc, X_OK) != 0)
		skip_all("deskbox-vnc not built next to the bridge");
	printf("# VNC server: %s\n", deskbox ? xl.vnc : "x11vnc");
	xlive_spawn(deskbox ? dvnc_argv : vnc, -1, display);
	int fd = xlive_connect_unix(sock, 10000);
	ok(fd >= 0, "connected to the VNC server's unix socket");
	if (fd < 0)
		return done();

	struct err e = ERR_INIT;
	struct capture *c = NULL;
	struct capture_opts o = {.bridge_path = bridge, .width = W, .height = H};
	double t0 = xlive_now_ms();
	int r = capture_start(&c, &o, fd, &e);
	ok(r == 0, "capture_start");
	if (r < 0) {
		printf("# %s\n", e.msg);
		return done();
	}
	r = capture_wait_ready(c, 10000, &e);
	ok(r == 0, "first frame mirrored");
	if (r < 0) {
		printf("# %s\n", e.msg);
		capture_free(c);
		return done();
	}
	printf("# bridge start to first frame (x11vnc still starting): %.1f ms\n",
	       xlive_now_ms() - t0);
	{
		/* A second connection to a running x11vnc: the real handshake
		 * cost, and two bridges side by side. */
		struct capture *c2 = NULL;
		int fd2 = xlive_connect_unix(sock, 2000);
		double t1 = xlive_now_ms();
		ok(capture_start(&c2, &o, fd2, &e) == 0 && capture_wait_ready(c2, 5000, &e) == 0,
		   "second bridge ready");
		printf("# second bridge start to first frame: %.1f ms\n", xlive_now_ms() - t1);
		capture_free(c2);
	}
	ok(capture_alive(c) == 1, "bridge alive");
	ok(capture_pid(c) > 0, "bridge pid");
	is_int(capture_width(c), W, "width");
	ok(capture_frame(c) >= 1, "frame counter started");

	double end;
	uint8_t *img = malloc((size_t)W * H * 4);
	uint64_t frame = 0;
	double times[100];
	for (int i = 0; i < 100; i++) {
		double s = xlive_now_ms();
		r = capture_snapshot(c, (struct capture_rect){0, 0, W, H}, img, W * 4, &frame, &e);
		times[i] = xlive_now_ms() - s;
	}
	ok(r == 0, "full snapshot");
	qsort(times, 100, sizeof(double), cmp_double);
	printf("# snapshot %dx%d: median %.3f ms\n", W, H, times[50]);
	uint8_t region[10 * 20 * 4 + 64];
	ok(capture_snapshot(c, (struct capture_rect){5, 7, 10, 20}, region, 10 * 4 + 3, NULL, &e) ==
	       0,
	   "region snapshot with padded stride");
	ok(capture_snapshot(c, (struct capture_rect){W - 5, 0, 10, 1}, region, 40, NULL, &e) < 0 &&
	       e.kind == ERR_INVALID,
	   "region past the edge rejected");
	ok(capture_snapshot(c, (struct capture_rect){0, 0, 0, 1}, region, 40, NULL, &e) < 0,
	   "empty region rejected");

	/* A change made by another X client is mirrored. */
	uint64_t before = capture_frame(c);
	/* What `xsetroot -solid red` does (x11-xserver-utils is not a
	 * dependency). */
	Display *dpy = XOpenDisplay(display);
	ok(dpy != NULL, "opened the X display");
	if (!dpy)
		return done();
	XSetWindowBackground(dpy, DefaultRootWindow(dpy), 0xff0000);
	XClearWindow(dpy, DefaultRootWindow(dpy));
	XFlush(dpy);
	r = capture_wait_frame(c, before, 5000, &e);
	is_int(r, 1, "frame changes after painting the root window");
	/* x11vnc finds root window changes by polling, a while after the
	 * first (cursor) update. */
	end = xlive_now_ms() + 5000;
	for (;;) {
		capture_snapshot(c, (struct capture_rect){0, 0, W, H}, img, W * 4, &frame, &e);
		int red = 1;
		for (int yy = 0; yy < H; yy += 16)
			for (int xx = 0; xx < W; xx += 16)
				/* Xvfb starts the pointer mid-screen and
				 * x11vnc draws it into the framebuffer. */
				red &= pixel(img, xx, yy) == 0xff0000 ||
				       (abs(xx - W / 2) < 32 && abs(yy - H / 2) < 32);
		if (red || xlive_now_ms() > end)
			break;
		capture_wait_frame(c, frame, 200, &e);
	}
	ok(pixel(img, 10, 10) == 0xff0000 && pixel(img, W - 1, H - 1) == 0xff0000,
	   "snapshot is red");
	ok(frame > before, "snapshot frame advanced");
	uint8_t px[4];
	capture_snapshot(c, (struct capture_rect){W / 4 + 3, H / 4 + 5, 1, 1}, px, 4, NULL, &e);
	ok(px[0] == 0 && px[1] == 0 && px[2] == 0xff, "region snapshot is B,G,R,X red");
	is_int(capture_wait_frame(c, capture_frame(c), 50, &e), 0, "quiet screen times out");

	/* What changed since a frame: a painted box is inside the damage. */
	struct capture_rect dmg;
	capture_damage(c, capture_frame(c), &dmg);
	ok(dmg.w == 0 && dmg.h == 0, "no damage since the current frame");
	before = capture_frame(c);
	GC gc = XCreateGC(dpy, DefaultRootWindow(dpy), 0, NULL);
	XSetForeground(dpy, gc, 0x00ff00);
	XFillRectangle(dpy, DefaultRootWindow(dpy), gc, 20, 30, 40, 10);
	XFlush(dpy);
	end = xlive_now_ms() + 5000;
	int inside = 0;
	while (!inside && xlive_now_ms() < end) {
		capture_wait_frame(c, capture_frame(c), 200, &e);
		capture_snapshot(c, (struct capture_rect){0, 0, W, H}, img, W * 4, &frame, &e);
		if (pixel(img, 59, 39) != 0x00ff00)
			continue;
		capture_damage(c, before, &dmg);
		inside = dmg.x <= 20 && dmg.y <= 30 && dmg.x + dmg.w >= 60 && dmg.y + dmg.h >= 40 &&
			 dmg.x + dmg.w <= W && dmg.y + dmg.h <= H;
	}
	char dwhy[96];
	snprintf(dwhy, sizeof(dwhy), "damage %u,%u %ux%u", dmg.x, dmg.y, dmg.w, dmg.h);
	diag(dwhy);
	ok(inside, "the damage since a frame holds a box painted after it");
	XFreeGC(dpy, gc);

	/* Typing into xterm: the exact bytes must arrive. */
	char out[PATH_MAX];
	snprintf(out, sizeof(out), "%s/typed", xl.tmpdir);
	char shcmd[PATH_MAX + 32];
	snprintf(shcmd, sizeof(shcmd), "cat > '%s'", out);
	char *xterm[] = {"xterm", "-u8", "-geometry", "80x24+0+0", "-e", "sh", "-c", shcmd, NULL};
	before = capture_frame(c);
	pid_t xt = xlive_spawn(xterm, -1, display);
	is_int(capture_wait_frame(c, before, 5000, &e), 1, "xterm drew");
	xlive_settle(c, 300, 5000);

	struct input_seq s = {0};
	r = input_seq_click(&s, 100, 100, INPUT_BUTTON_LEFT, 1, NULL, 0, &e);
	ok(r == 0 && send_seq(c, &s) == 0, "click into xterm");
	input_seq_release(&s);
	int32_t x, y;
	capture_pointer(c, &x, &y);
	ok(x == 100 && y == 100, "pointer position recorded");
	xlive_settle(c, 200, 2000);

	/* Latency: one key press+release until the echo changes the frame;
	 * "a" then BackSpace so nothing reaches the file. */
	double lat[40];
	int nlat = 0;
	for (int i = 0; i < 20; i++) {
		const char *keys[] = {"a", "BackSpace"};
		for (int k = 0; k < 2; k++) {
			input_seq_keys(&s, keys[k], &e);
			before = capture_frame(c);
			double s0 = xlive_now_ms();
			send_seq(c, &s);
			if (capture_wait_frame(c, before, 2000, &e) == 1)
				lat[nlat++] = xlive_now_ms() - s0;
			input_seq_release(&s);
			xlive_settle(c, 30, 500);
		}
	}
	ok(nlat == 40, "every key echo changed the frame");
	if (nlat) {
		qsort(lat, (size_t)nlat, sizeof(double), cmp_double);
		printf("# key -> frame change: median %.1f ms, min %.1f, max %.1f (n=%d)\n",
		       lat[nlat / 2], lat[0], lat[nlat - 1], nlat);
	}

	const char *text = "héllo 你好 ✓ ÄÖÜß € 😀";
	r = input_seq_text(&s, text, strlen(text), &e);
	if (r == 0)
		r = input_seq_keys(&s, "Return ctrl+d", &e);
	ok(r == 0, "built the typing sequence");
	double s0 = xlive_now_ms();
	ok(send_seq(c, &s) == 0, "sent text in one capture_send");
	double sent_ms = xlive_now_ms() - s0;
	input_seq_release(&s);
	/* cat exits on ctrl+d, then xterm: the file is complete. */
	int st = -1;
	end = xlive_now_ms() + 10000;
	while (xlive_now_ms() < end && waitpid(xt, &st, WNOHANG) == 0)
		usleep(2000);
	double done_ms = xlive_now_ms() - s0;
	xlive_forget(xt);
	char want[256], buf[256] = "";
	snprintf(want, sizeof(want), "%s\n", text);
	size_t n = xlive_read_file(out, buf, sizeof(buf) - 1);
	buf[n] = '\0';
	is_str(buf, want, "xterm received the exact unicode text");
	size_t chars = 0;
	for (const char *q = want; *q; q++)
		chars += ((unsigned char)*q & 0xc0) != 0x80;
	printf("# typed %zu chars: sent in %.1f ms, in the file after %.1f ms (%.0f chars/s)\n",
	       chars, sent_ms, done_ms, (double)chars / (done_ms / 1000.0));

	/* A dead bridge is noticed. */
	pid_t bp = capture_pid(c);
	kill(bp, SIGKILL);
	end = xlive_now_ms() + 2000;
	while (xlive_now_ms() < end && capture_alive(c))
		usleep(1000);
	is_int(capture_alive(c), 0, "bridge death noticed");
	is_int(capture_pid(c), -1, "pid is -1 once gone");
	struct input_event mv = {.type = INPUT_MOVE, .x = 1, .y = 1};
	ok(capture_send(c, &mv, 1, &e) < 0 && e.kind == ERR_UNAVAILABLE,
	   "send to dead bridge is unavailable");
	ok(capture_wait_frame(c, capture_frame(c), 1000, &e) < 0, "wait on dead bridge fails");
	capture_free(c);
	XCloseDisplay(dpy);
	free(img);
	return done();
}
