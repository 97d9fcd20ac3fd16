/* deskbox-vnc input: RFB PointerEvents and KeyEvents as XTest events.
 *
 * An RFB KeyEvent names a keysym; X wants a keycode plus a modifier state
 * under which that keycode means the keysym.  Text must arrive exactly (an
 * agent types "héllo 你好 ✓ ÄÖÜß € 😀" and the application must receive
 * those characters), so:
 *
 * - A keysym on level 1 or 2 (unshifted/shifted) of a keycode in the core
 *   keymap presses that keycode; for character keysyms, Shift is pressed or
 *   released around the press when the current state would pick the other
 *   level (x11vnc's "modtweak").  Shift held by the client stays held for
 *   letters, so "ctrl+shift+t" keeps its Shift; Caps Lock counts for letters.
 *   Modifiers the client holds are restored right after the press.
 * - Any other keysym (Unicode keysyms 0x01000000 + code point, Latin-1
 *   letters a US keymap lacks, AltGr-only symbols) is bound to a spare
 *   keycode as [keysym, keysym] (both levels: Shift cannot change it) with
 *   XChangeKeyboardMapping.  Every client then gets a MappingNotify before
 *   the key event and re-reads the keymap when it translates the key.
 * - A client translates a key event with the keymap it holds when it
 *   processes the event, which can be after we sent more events: rebinding a
 *   keycode too early makes an earlier event type the later character.
 *   Spare keycodes therefore rotate least recently used first, are never
 *   rebound while pressed, and not within REBIND_MIN_AGE_MS of their last
 *   press (we wait instead).  Xvfb's keymap has 18 empty keycodes; keycodes
 *   holding only XF86 media keysyms (0x1008FFxx, no physical keyboard has
 *   them here) join the pool, which gives ~100 keycodes.
 */
#include <X11/Xatom.h>
#include <X11/XKBlib.h>
#include <X11/Xlib.h>
#include <X11/Xutil.h>
#include <X11/extensions/XTest.h>
#include <X11/keysym.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "vnc_input.h"
#include "vnc_util.h"

/* How long a spare keycode stays bound after its last press before it may
 * be rebound: a generous bound on how far behind a busy client may process
 * its key events.  250 ms was seen to be too short for xterm on a 2-core
 * machine at load 7 (test_capture_vnc lost ~40 CJK characters); at 1 s the
 * ~100 spare keycodes still allow ~100 rebinds a second. */
#define REBIND_MIN_AGE_MS 1000
/* The root window property listing our spare keycodes, so that a restarted
 * deskbox-vnc (init restarts it) recognises keycodes it bound before. */
#define SPARE_PROP "_DESKBOX_VNC_SPARE_KEYCODES"

#define XF86_FIRST 0x1008FF00u
#define XF86_LAST  0x1008FFFFu

static int bit_get(const unsigned char *set, int code)
{
	return code >= 0 && code < 256 && (set[code >> 3] >> (code & 7)) & 1;
}

static void bit_set(unsigned char *set, int code)
{
	if (code >= 0 && code < 256)
		set[code >> 3] |= (unsigned char)(1u << (code & 7));
}

static KeySym *row(const struct vnc_input *in, int code)
{
	return in->map + (size_t)(code - in->min_code) * (size_t)in->per;
}

/* The keysyms of levels 1 and 2 of group 1, with the core protocol's rule
 * for a single alphabetic keysym (it stands for its lower and upper case). */
static void levels(const struct vnc_input *in, int code, KeySym *s0, KeySym *s1)
{
	const KeySym *k = row(in, code);
	*s0 = k[0];
	*s1 = in->per > 1 ? k[1] : NoSymbol;
	if (*s1 == NoSymbol) {
		KeySym lo, up;
		XConvertCase(*s0, &lo, &up);
		if (lo != up) {
			*s0 = lo;
			*s1 = up;
		} else {
			*s1 = *s0;
		}
	}
}

static int load_maps(struct vnc_input *in)
{
	int per = 0;
	KeySym *map = XGetKeyboardMapping(in->dpy, (KeyCode)in->min_code,
					  in->max_code - in->min_code + 1, &per);
	if (!map || per < 1) {
		if (map)
			XFree(map);
		return -1;
	}
	if (in->map)
		XFree(in->map);
	in->map = map;
	in->per = per;

	XModifierKeymap *mm = XGetModifierMapping(in->dpy);
	if (!mm)
		return -1;
	memset(in->shift_codes, 0, sizeof(in->shift_codes));
	memset(in->mod_codes, 0, sizeof(in->mod_codes));
	in->shift_code = 0;
	for (int m = 0; m < 8; m++) {
		for (int i = 0; i < mm->max_keypermod; i++) {
			KeyCode c = mm->modifiermap[m * mm->max_keypermod + i];
			if (!c)
				continue;
			bit_set(in->mod_codes, c);
			if (m != ShiftMapIndex)
				continue;
			bit_set(in->shift_codes, c);
			/* Prefer the keycode that means Shift_L. */
			if (!in->shift_code ||
			    (c >= in->min_code && c <= in->max_code && row(in, c)[0] == XK_Shift_L))
				in->shift_code = c;
		}
	}
	XFreeModifiermap(mm);
	return 0;
}

/* Whether `code` may serve as a spare: not a modifier, and holding nothing
 * but NoSymbol, XF86 media keysyms, or `bound` (our own earlier binding). */
static int usable_spare(const struct vnc_input *in, int code, KeySym bound)
{
	if (code <= in->min_code || code > in->max_code || bit_get(in->mod_codes, code))
		return 0;
	const KeySym *k = row(in, code);
	for (int i = 0; i < in->per; i++)
		if (k[i] != NoSymbol && k[i] != bound && (k[i] < XF86_FIRST || k[i] > XF86_LAST))
			return 0;
	return 1;
}

/* The keysym we bound earlier to `code` (all levels the same character
 * keysym), or NoSymbol. */
static KeySym bound_keysym(const struct vnc_input *in, int code)
{
	const KeySym *k = row(in, code);
	KeySym ks = NoSymbol;
	for (int i = 0; i < in->per; i++) {
		if (k[i] == NoSymbol)
			continue;
		if (ks != NoSymbol && k[i] != ks)
			return NoSymbol;
		ks = k[i];
	}
	return ks >= XF86_FIRST && ks <= XF86_LAST ? NoSymbol : ks;
}

static void add_spare(struct vnc_input *in, int code, int ours)
{
	if (in->n_spare == VNC_MAX_SPARE)
		return;
	for (int i = 0; i < in->n_spare; i++)
		if (in->spare[i].code == code)
			return;
	struct vnc_spare *s = &in->spare[in->n_spare];
	KeySym b = ours ? bound_keysym(in, code) : NoSymbol;
	if (!usable_spare(in, code, b))
		return;
	const KeySym *k = row(in, code);
	int empty = 1;
	for (int i = 0; i < in->per; i++)
		empty &= k[i] == NoSymbol;
	/* Never-used keycodes: empty ones first (0), then XF86 ones (1). */
	*s = (struct vnc_spare){.code = (KeyCode)code, .bound = b, .used_ns = empty ? 0 : 1};
	in->n_spare++;
}

static void find_spares(struct vnc_input *in)
{
	Atom prop = XInternAtom(in->dpy, SPARE_PROP, False);
	Atom type;
	int format;
	unsigned long n = 0, after;
	unsigned char *data = NULL;
	if (XGetWindowProperty(in->dpy, in->root, prop, 0, VNC_MAX_SPARE / 4, False, XA_CARDINAL,
			       &type, &format, &n, &after, &data) == Success &&
	    type == XA_CARDINAL && format == 8)
		for (unsigned long i = 0; i < n; i++)
			add_spare(in, data[i], 1);
	if (data)
		XFree(data);
	for (int pass = 0; pass < 2; pass++)
		for (int code = in->min_code + 1; code <= in->max_code; code++) {
			const KeySym *k = row(in, code);
			int empty = 1;
			for (int i = 0; i < in->per; i++)
				empty &= k[i] == NoSymbol;
			if (pass == 0 ? empty : !empty)
				add_spare(in, code, 0);
		}
	unsigned char codes[VNC_MAX_SPARE];
	for (int i = 0; i < in->n_spare; i++)
		codes[i] = in->spare[i].code;
	XChangeProperty(in->dpy, in->root, prop, XA_CARDINAL, 8, PropModeReplace, codes,
			in->n_spare);
}

int vnc_input_init(struct vnc_input *in, Display *dpy, int width, int height)
{
	memset(in, 0, sizeof(*in));
	in->dpy = dpy;
	in->root = DefaultRootWindow(dpy);
	in->width = width;
	in->height = height;
	in->px = in->py = -1;
	XDisplayKeycodes(dpy, &in->min_code, &in->max_code);
	if (in->min_code < 8 || in->max_code > 255 || in->min_code > in->max_code)
		return -1;
	if (load_maps(in) < 0)
		return -1;
	find_spares(in);
	vnc_debug("%d spare keycodes", in->n_spare);
	return 0;
}

void vnc_input_mapping_changed(struct vnc_input *in)
{
	if (load_maps(in) < 0) {
		vnc_say("cannot re-read the keymap");
		return;
	}
	/* Drop spares another client has since given a meaning. */
	int j = 0;
	for (int i = 0; i < in->n_spare; i++) {
		struct vnc_spare *s = &in->spare[i];
		if (!usable_spare(in, s->code, s->bound))
			continue;
		if (s->bound != NoSymbol && bound_keysym(in, s->code) != s->bound)
			s->bound = NoSymbol;
		in->spare[j++] = *s;
	}
	in->n_spare = j;
}

static struct vnc_spare *spare_of(struct vnc_input *in, int code)
{
	for (int i = 0; i < in->n_spare; i++)
		if (in->spare[i].code == code)
			return &in->spare[i];
	return NULL;
}

static struct vnc_spare *spare_bound_to(struct vnc_input *in, KeySym ks)
{
	for (int i = 0; i < in->n_spare; i++)
		if (in->spare[i].bound == ks)
			return &in->spare[i];
	return NULL;
}

/* The keycode with `ks` on level 1 or 2, the level `first` preferred (2
 * while the client holds Shift: "shift+comma" is the shifted "<" of the
 * comma key, not the unshifted one of the <LSGT> key); 0 when none. */
static KeyCode find_key(const struct vnc_input *in, KeySym ks, int first, int *level)
{
	for (int k = 0; k < 2; k++) {
		int want = k ^ first;
		for (int code = in->min_code; code <= in->max_code; code++) {
			KeySym s[2];
			levels(in, code, &s[0], &s[1]);
			if (s[want] == ks) {
				*level = want;
				return (KeyCode)code;
			}
		}
	}
	return 0;
}

/* A modifier keysym only on the second level of a key (Xvfb's keymap has
 * Meta_L on Alt_L's key and on the otherwise empty <META> key, in mod1):
 * the empty first level of such a modifier key is given the keysym, so that
 * pressing it means that modifier and no Shift is needed.  Once per keysym;
 * the modifier map is per keycode and stays as it is. */
static void modifier_first_level(struct vnc_input *in, KeySym ks)
{
	int level;
	if (!IsModifierKey(ks) || (find_key(in, ks, 0, &level) && level == 0))
		return;
	for (int code = in->min_code; code <= in->max_code; code++) {
		KeySym *k = row(in, code);
		if (!bit_get(in->mod_codes, code) || in->per < 2 || k[0] != NoSymbol || k[1] != ks)
			continue;
		KeySym syms[2] = {ks, ks};
		XChangeKeyboardMapping(in->dpy, code, 2, syms, 1);
		k[0] = ks;
		vnc_debug("modifier keysym 0x%lx now on level 1 of keycode %d", (unsigned long)ks,
			  code);
		return;
	}
}

/* Whether the client holds a Shift key through us. */
static int client_shift(const struct vnc_input *in)
{
	for (int i = 0; i < in->n_held; i++)
		if (in->held[i].keysym == XK_Shift_L || in->held[i].keysym == XK_Shift_R)
			return 1;
	return 0;
}

/* Binds `ks` to the least recently used spare keycode that is not held. */
static struct vnc_spare *bind_spare(struct vnc_input *in, KeySym ks)
{
	struct vnc_spare *best = NULL;
	for (int i = 0; i < in->n_spare; i++) {
		struct vnc_spare *s = &in->spare[i];
		if (!s->held && (!best || s->used_ns < best->used_ns))
			best = s;
	}
	if (!best)
		return NULL;
	uint64_t min_age = (uint64_t)REBIND_MIN_AGE_MS * 1000000u, now = clock_mono_ns();
	if (best->used_ns > 1 && now - best->used_ns < min_age) {
		/* Everything sent so far is delivered; then give the clients
		 * the rest of the time to translate it. */
		XSync(in->dpy, False);
		clock_sleep_us((long long)((min_age - (now - best->used_ns) + 999) / 1000));
		in->rebind_waits++;
	}
	/* Both levels: a Shift the client holds cannot turn it into another
	 * keysym, and XKB gives such a key the TWO_LEVEL type, which Caps Lock
	 * does not affect either. */
	KeySym syms[2] = {ks, ks};
	XChangeKeyboardMapping(in->dpy, best->code, 2, syms, 1);
	KeySym *k = row(in, best->code);
	for (int i = 0; i < in->per; i++)
		k[i] = i < 2 ? ks : NoSymbol;
	best->bound = ks;
	in->rebinds++;
	vnc_debug("bound keysym 0x%lx to keycode %d", (unsigned long)ks, best->code);
	return best;
}

/* Keysyms that stand for characters (the ones whose level matters to the
 * text that arrives): Latin-1 and the legacy sets below the function keys,
 * and Unicode keysyms.  Function, cursor, keypad, modifier and dead keys get
 * no Shift tweaking: "shift+Tab" must stay Shift+Tab. */
static int is_char_keysym(KeySym ks)
{
	return (ks >= 0x20 && ks < 0xfe00) || (ks & 0xff000000u) == 0x01000000u;
}

static void press_plain(struct vnc_input *in, KeyCode code)
{
	XTestFakeKeyEvent(in->dpy, code, True, CurrentTime);
}

/* Presses `code`, which means `ks` on `level`, with Shift adjusted so that
 * it does mean `ks`, and the client's modifiers restored afterwards. */
static void press_tweaked(struct vnc_input *in, KeyCode code, int level, KeySym ks)
{
	Window r, c;
	int rx, ry, wx, wy;
	unsigned int mask = 0;
	/* The core state includes keys pressed by any client, and Caps Lock. */
	XQueryPointer(in->dpy, in->root, &r, &c, &rx, &ry, &wx, &wy, &mask);
	int shift = (mask & ShiftMask) != 0, lock = (mask & LockMask) != 0;
	KeySym s0, s1, lo, up;
	levels(in, code, &s0, &s1);
	XConvertCase(s0, &lo, &up);
	int alpha = lo == s0 && up == s1 && lo != up;

	int add_shift = 0, drop_shift = 0;
	if (alpha) {
		/* Letters: Shift xor Lock picks the capital.  A held Shift is
		 * the client's choice (a shortcut like ctrl+shift+t). */
		if (!shift && (level == 1) != lock)
			add_shift = 1;
	} else {
		/* A held Shift is dropped only where it would pick another
		 * keysym: "shift+space" keeps it, as xdotool does. */
		add_shift = level == 1 && !shift;
		drop_shift = level == 0 && shift && s0 != s1;
	}
	if (add_shift && !in->shift_code)
		add_shift = 0;
	KeyCode dropped[32];
	int n_dropped = 0;
	if (drop_shift) {
		char keys[32];
		XQueryKeymap(in->dpy, keys);
		for (int k = in->min_code; k <= in->max_code && n_dropped < 32; k++)
			if (bit_get(in->shift_codes, k) && bit_get((unsigned char *)keys, k))
				dropped[n_dropped++] = (KeyCode)k;
	}
	vnc_debug("key 0x%lx: keycode %d level %d%s%s", (unsigned long)ks, code, level,
		  add_shift ? " +shift" : "", n_dropped ? " -shift" : "");
	for (int i = 0; i < n_dropped; i++)
		XTestFakeKeyEvent(in->dpy, dropped[i], False, CurrentTime);
	if (add_shift)
		XTestFakeKeyEvent(in->dpy, in->shift_code, True, CurrentTime);
	press_plain(in, code);
	if (add_shift)
		XTestFakeKeyEvent(in->dpy, in->shift_code, False, CurrentTime);
	for (int i = 0; i < n_dropped; i++)
		XTestFakeKeyEvent(in->dpy, dropped[i], True, CurrentTime);
}

/* The modifier mask Num Lock sets, 0 when the keymap has none. */
static unsigned int numlock_mask(struct vnc_input *in)
{
	return XkbKeysymToModifiers(in->dpy, XK_Num_Lock);
}

/* Keypad digits and operators are the second level of their keycodes, which
 * Num Lock selects (level 1 is KP_End, KP_Down, ...): when Num Lock is off,
 * it is locked on for the press and unlocked after the release, as xdotool
 * does.  Returns 1 when it locked it. */
static int numlock_on(struct vnc_input *in, KeySym ks, int level)
{
	if (!IsKeypadKey(ks) || level != 1)
		return 0;
	unsigned int m = numlock_mask(in);
	XkbStateRec st;
	if (!m || XkbGetState(in->dpy, XkbUseCoreKbd, &st) != Success || (st.locked_mods & m))
		return 0;
	XkbLockModifiers(in->dpy, XkbUseCoreKbd, m, m);
	return 1;
}

static void release_key(struct vnc_input *in, uint32_t keysym)
{
	KeyCode code = 0;
	int numlock = 0;
	for (int i = in->n_held - 1; i >= 0; i--) {
		if (in->held[i].keysym != keysym)
			continue;
		code = in->held[i].code;
		numlock = in->held[i].numlock;
		memmove(&in->held[i], &in->held[i + 1],
			(size_t)(in->n_held - i - 1) * sizeof(in->held[0]));
		in->n_held--;
		break;
	}
	if (!code) {
		/* A release we did not see pressed: release where the keysym
		 * is now, if anywhere (X ignores releases of keys not down). */
		struct vnc_spare *s = spare_bound_to(in, keysym);
		int level;
		code = s ? s->code : find_key(in, keysym, 0, &level);
		if (!code)
			return;
	}
	struct vnc_spare *s = spare_of(in, code);
	if (s && s->held > 0)
		s->held--;
	XTestFakeKeyEvent(in->dpy, code, False, CurrentTime);
	if (numlock)
		XkbLockModifiers(in->dpy, XkbUseCoreKbd, numlock_mask(in), 0);
	XFlush(in->dpy);
}

void vnc_input_key(struct vnc_input *in, int down, uint32_t keysym)
{
	KeySym ks = keysym;
	if (!down) {
		release_key(in, keysym);
		return;
	}
	if (ks == NoSymbol)
		return;
	int level = 0, tweak = 0;
	KeyCode code = 0;
	struct vnc_spare *s = spare_bound_to(in, ks);
	if (s) {
		code = s->code;
	} else {
		modifier_first_level(in, ks);
		code = find_key(in, ks, client_shift(in), &level);
		tweak = code && is_char_keysym(ks) && !spare_of(in, code);
	}
	if (!code) {
		/* A modifier bound to a spare keycode would not be a modifier:
		 * the modifier map stays as it is. */
		if (IsModifierKey(ks)) {
			vnc_debug("modifier keysym 0x%lx is not in the keymap", (unsigned long)ks);
			return;
		}
		s = bind_spare(in, ks);
		if (!s) {
			vnc_say("no spare keycode free for keysym 0x%lx", (unsigned long)ks);
			return;
		}
		code = s->code;
	}
	s = spare_of(in, code);
	if (s) {
		s->used_ns = clock_mono_ns();
		s->held++;
	}
	int numlock = 0;
	if (tweak)
		press_tweaked(in, code, level, ks);
	else {
		numlock = numlock_on(in, ks, level);
		press_plain(in, code);
	}
	if (in->n_held == VNC_MAX_HELD) {
		/* A client that never releases: forget the oldest. */
		struct vnc_spare *old = spare_of(in, in->held[0].code);
		if (old && old->held > 0)
			old->held--;
		memmove(&in->held[0], &in->held[1],
			(size_t)(VNC_MAX_HELD - 1) * sizeof(in->held[0]));
		in->n_held--;
	}
	in->held[in->n_held++] =
	    (struct vnc_held){.keysym = keysym, .code = code, .numlock = numlock};
	XFlush(in->dpy);
}

void vnc_input_pointer(struct vnc_input *in, int mask, int x, int y)
{
	x = x < 0 ? 0 : x >= in->width ? in->width - 1 : x;
	y = y < 0 ? 0 : y >= in->height ? in->height - 1 : y;
	if (x != in->px || y != in->py) {
		XTestFakeMotionEvent(in->dpy, DefaultScreen(in->dpy), x, y, CurrentTime);
		in->px = x;
		in->py = y;
	}
	/* RFB mask bit n is X button n + 1: 1-3 the buttons, 4-7 the wheel
	 * (vertical, horizontal), 8 "back". */
	for (int b = 0; b < 8; b++) {
		int bit = 1 << b;
		if ((mask ^ in->buttons) & bit)
			XTestFakeButtonEvent(in->dpy, (unsigned)b + 1, (mask & bit) ? True : False,
					     CurrentTime);
	}
	in->buttons = mask & 0xff;
	XFlush(in->dpy);
}

void vnc_input_release(struct vnc_input *in)
{
	if (in->dpy) {
		for (int i = in->n_held - 1; i >= 0; i--) {
			XTestFakeKeyEvent(in->dpy, in->held[i].code, False, CurrentTime);
			if (in->held[i].numlock)
				XkbLockModifiers(in->dpy, XkbUseCoreKbd, numlock_mask(in), 0);
		}
		for (int b = 0; b < 8; b++)
			if (in->buttons & (1 << b))
				XTestFakeButtonEvent(in->dpy, (unsigned)b + 1, False, CurrentTime);
		XFlush(in->dpy);
	}
	in->n_held = 0;
	in->buttons = 0;
	if (in->map)
		XFree(in->map);
	in->map = NULL;
}
