/* Key names and combinations to keysyms. */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <X11/Xlib.h>
#include <X11/keysym.h>

#include "common/text.h"
#include "internal.h"

/* Longest key name accepted; X11's longest keysym names are ~30 bytes. */
#define KEY_NAME_MAX 64
/* Keys in one combination ("ctrl+alt+shift+super+x" is 5). */
#define COMBO_MAX 16

/* Names agents and people write that X11 spells differently, matched
 * case-insensitively. */
static const struct {
	const char *name;
	uint32_t keysym;
} aliases[] = {
    {"ctrl", XK_Control_L},
    {"control", XK_Control_L},
    {"lctrl", XK_Control_L},
    {"rctrl", XK_Control_R},
    {"alt", XK_Alt_L},
    {"lalt", XK_Alt_L},
    {"ralt", XK_Alt_R},
    {"altgr", XK_ISO_Level3_Shift},
    {"shift", XK_Shift_L},
    {"lshift", XK_Shift_L},
    {"rshift", XK_Shift_R},
    {"super", XK_Super_L},
    {"win", XK_Super_L},
    {"windows", XK_Super_L},
    {"cmd", XK_Super_L},
    {"command", XK_Super_L},
    /* xdotool's (and so Anthropic's) "meta" is Meta; OpenAI's META is
     * mapped to Super by its adapter (desktop_openai.c). */
    {"meta", XK_Meta_L},
    {"enter", XK_Return},
    {"return", XK_Return},
    {"esc", XK_Escape},
    {"escape", XK_Escape},
    {"del", XK_Delete},
    {"delete", XK_Delete},
    {"bksp", XK_BackSpace},
    {"backspace", XK_BackSpace},
    {"pgup", XK_Prior},
    {"pageup", XK_Prior},
    {"page_up", XK_Prior},
    {"pgdn", XK_Next},
    {"pagedown", XK_Next},
    {"page_down", XK_Next},
    {"up", XK_Up},
    /* OpenAI computer-use key names (DOM KeyboardEvent.key style). */
    {"arrowup", XK_Up},
    {"arrowdown", XK_Down},
    {"arrowleft", XK_Left},
    {"arrowright", XK_Right},
    {"option", XK_Alt_L},
    {"down", XK_Down},
    {"left", XK_Left},
    {"right", XK_Right},
    {"space", XK_space},
    {"tab", XK_Tab},
    {"home", XK_Home},
    {"end", XK_End},
    {"ins", XK_Insert},
    {"insert", XK_Insert},
    {"plus", XK_plus},
    {"minus", XK_minus},
    {"capslock", XK_Caps_Lock},
    {"caps_lock", XK_Caps_Lock},
    {"menu", XK_Menu},
    {"print", XK_Print},
    {"printscreen", XK_Print},
    {"prtsc", XK_Print},
    {"pause", XK_Pause},
    {"numlock", XK_Num_Lock},
    {"scrolllock", XK_Scroll_Lock},
};

/* XStringToKeysym may lazily load the XKeysymDB file into unlocked static
 * state on a name it does not know, so calls from server threads are
 * serialised. */
static pthread_mutex_t xlib_lock = PTHREAD_MUTEX_INITIALIZER;

static uint32_t x_lookup(const char *name)
{
	pthread_mutex_lock(&xlib_lock);
	KeySym k = XStringToKeysym(name);
	pthread_mutex_unlock(&xlib_lock);
	return k == NoSymbol ? 0 : (uint32_t)k;
}

static int parse_hex(const char *name, uint32_t *keysym)
{
	if (!name[2])
		return 0;
	uint32_t v = 0;
	for (const char *p = name + 2; *p; p++) {
		if (!isxdigit((unsigned char)*p) || v > 0x0fffffffu)
			return 0;
		v = v * 16 + (uint32_t)(isdigit((unsigned char)*p)
					    ? *p - '0'
					    : tolower((unsigned char)*p) - 'a' + 10);
	}
	/* Keysyms are 29-bit values (X11 protocol); 0 is NoSymbol. */
	if (v == 0 || v > 0x1fffffffu)
		return 0;
	*keysym = v;
	return 1;
}

int input_keysym_parse(const char *name, uint32_t *keysym, struct err *e)
{
	if (!name || !*name)
		return err_set(e, ERR_INVALID, EINVAL, "empty key name");
	size_t len = strlen(name);
	if (len > KEY_NAME_MAX)
		return err_set(e, ERR_INVALID, EINVAL, "key name '%.*s...' too long",
			       UTF8_CUT(name, 64));

	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
		if (strcasecmp(name, aliases[i].name) == 0) {
			*keysym = aliases[i].keysym;
			return 0;
		}
	}

	/* One character, written as itself: "a", "A", "é", "你". */
	uint32_t cp;
	size_t n = 0;
	if (utf8_decode(name, len, &n, &cp) == 0 && n == len) {
		if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
			return err_set(e, ERR_INVALID, EINVAL, "control character in key name");
		*keysym = input_codepoint_keysym(cp);
		return 0;
	}

	if (name[0] == '0' && (name[1] == 'x' || name[1] == 'X')) {
		/* Decided here rather than by Xlib, which truncates huge values. */
		if (parse_hex(name, keysym))
			return 0;
		return err_set(e, ERR_INVALID, EINVAL, "invalid keysym '%s'", name);
	}

	/* Only printable ASCII can be an X11 keysym name; rejecting the rest
	 * also keeps odd bytes away from Xlib. */
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		if (c <= 0x20 || c >= 0x7f)
			return err_set(e, ERR_INVALID, EINVAL, "unknown key '%.*s'",
				       UTF8_CUT(name, 64));
	}
	uint32_t k = x_lookup(name);
	if (!k && islower((unsigned char)name[0])) {
		/* "return" -> "Return", "f5" -> "F5". */
		char buf[KEY_NAME_MAX + 1];
		memcpy(buf, name, len + 1);
		buf[0] = (char)toupper((unsigned char)buf[0]);
		k = x_lookup(buf);
	}
	if (!k)
		return err_set(e, ERR_INVALID, EINVAL, "unknown key '%s'", name);
	*keysym = k;
	return 0;
}

/* Splits one combination "ctrl+shift+t" (`len` bytes at `combo`, not NUL
 * terminated) into keysyms. */
static int parse_combo(const char *combo, size_t len, uint32_t *keys, size_t *nkeys, struct err *e)
{
	*nkeys = 0;
	if (len == 1 && combo[0] == '+') {
		keys[(*nkeys)++] = XK_plus;
		return 0;
	}
	size_t start = 0;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && combo[i] != '+')
			continue;
		size_t n = i - start;
		if (n == 0)
			return err_set(e, ERR_INVALID, EINVAL,
				       "empty key name in '%.*s' (write '+' as 'plus')", (int)len,
				       combo);
		if (n > KEY_NAME_MAX)
			return err_set(e, ERR_INVALID, EINVAL, "key name too long in '%.*s...'",
				       UTF8_CUT(combo, 64));
		if (*nkeys == COMBO_MAX)
			return err_set(e, ERR_INVALID, EINVAL, "more than %d keys in '%.*s'",
				       COMBO_MAX, UTF8_CUT(combo, 64));
		char name[KEY_NAME_MAX + 1];
		memcpy(name, combo + start, n);
		name[n] = '\0';
		int r = input_keysym_parse(name, &keys[*nkeys], e);
		if (r < 0)
			return r;
		(*nkeys)++;
		start = i + 1;
	}
	return 0;
}

/* What Shift makes of a key on the sandbox's US keymap, as xdotool (which
 * presses the keycode with Shift held) gives it: "shift+1" is "!".  The VNC
 * server picks a keycode by keysym and drops a held Shift when the keysym is
 * on the unshifted level, so the shifted keysym is sent instead. */
static const char shift_pairs[][2] = {
    {'1', '!'}, {'2', '@'},  {'3', '#'}, {'4', '$'}, {'5', '%'}, {'6', '^'},  {'7', '&'},
    {'8', '*'}, {'9', '('},  {'0', ')'}, {'-', '_'}, {'=', '+'}, {'[', '{'},  {']', '}'},
    {';', ':'}, {'\'', '"'}, {',', '<'}, {'.', '>'}, {'/', '?'}, {'\\', '|'}, {'`', '~'},
};

static uint32_t shifted(uint32_t keysym)
{
	for (size_t i = 0; i < sizeof(shift_pairs) / sizeof(shift_pairs[0]); i++)
		if (keysym == (unsigned char)shift_pairs[i][0])
			return (unsigned char)shift_pairs[i][1];
	return keysym;
}

static int push_combo(struct input_seq *s, uint32_t *keys, size_t n, int press, int release,
		      struct err *e)
{
	int shift = 0;
	for (size_t i = 0; i < n; i++)
		if (keys[i] == XK_Shift_L || keys[i] == XK_Shift_R)
			shift = 1;
	for (size_t i = 0; shift && i < n; i++)
		keys[i] = shifted(keys[i]);
	int r = 0;
	for (size_t i = 0; r == 0 && press && i < n; i++)
		r = input_push_key(s, keys[i], 1, e);
	for (size_t i = n; r == 0 && release && i > 0; i--)
		r = input_push_key(s, keys[i - 1], 0, e);
	return r;
}

static int is_sep(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int input_seq_keys(struct input_seq *s, const char *keys, struct err *e)
{
	if (!keys)
		return err_set(e, ERR_INVALID, EINVAL, "missing keys");
	const char *p = keys;
	int any = 0;
	while (*p) {
		while (is_sep(*p))
			p++;
		if (!*p)
			break;
		const char *start = p;
		while (*p && !is_sep(*p))
			p++;
		uint32_t combo[COMBO_MAX];
		size_t n;
		int r = parse_combo(start, (size_t)(p - start), combo, &n, e);
		if (r == 0)
			r = push_combo(s, combo, n, 1, 1, e);
		if (r < 0)
			return r;
		any = 1;
	}
	if (!any)
		return err_set(e, ERR_INVALID, EINVAL, "no keys given");
	return 0;
}

int input_seq_keys_dir(struct input_seq *s, const char *combo, int down, struct err *e)
{
	if (!combo)
		return err_set(e, ERR_INVALID, EINVAL, "missing keys");
	size_t len = strlen(combo);
	while (len && is_sep(combo[len - 1]))
		len--;
	while (len && is_sep(*combo))
		combo++, len--;
	for (size_t i = 0; i < len; i++)
		if (is_sep(combo[i]))
			return err_set(e, ERR_INVALID, EINVAL,
				       "'%.*s' is a sequence; only one combination can be held",
				       UTF8_CUT(combo, 64));
	if (!len)
		return err_set(e, ERR_INVALID, EINVAL, "no keys given");
	uint32_t keys[COMBO_MAX];
	size_t n;
	int r = parse_combo(combo, len, keys, &n, e);
	if (r < 0)
		return r;
	return push_combo(s, keys, n, down, !down, e);
}
