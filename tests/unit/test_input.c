#include <errno.h>
#include <X11/keysym.h>
#include <string.h>

#include "input/input.h"
#include "tests/harness.h"

static uint32_t key(const char *name)
{
	struct err e = ERR_INIT;
	uint32_t k = 0;
	if (input_keysym_parse(name, &k, &e) < 0)
		return 0;
	return k;
}

/* Renders a sequence as "+ctrl_l +t -t -ctrl_l"-like text with hex keysyms. */
static const char *render(const struct input_seq *s)
{
	static char buf[4096];
	size_t o = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < s->n && o < sizeof(buf) - 32; i++) {
		const struct input_event *ev = &s->ev[i];
		if (ev->type == INPUT_KEY)
			o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%c%x", i ? " " : "",
					      ev->down ? '+' : '-', ev->keysym);
		else if (ev->type == INPUT_PAUSE)
			o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%sp%d", i ? " " : "",
					      ev->x);
		else if (ev->type == INPUT_MOVE)
			o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%sm%d,%d", i ? " " : "",
					      ev->x, ev->y);
		else
			o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%cb%d", i ? " " : "",
					      ev->down ? '+' : '-', ev->button);
	}
	return buf;
}

int main(void)
{
	struct err e = ERR_INIT;

	/* Names */
	is_int(key("Return"), XK_Return, "Return");
	is_int(key("return"), XK_Return, "return via first-letter uppercase");
	is_int(key("ENTER"), XK_Return, "alias case-insensitive");
	is_int(key("F5"), XK_F5, "F5");
	is_int(key("f5"), XK_F5, "f5");
	is_int(key("KP_Enter"), XK_KP_Enter, "KP_Enter");
	is_int(key("XF86AudioMute"), 0x1008ff12, "XF86AudioMute");
	is_int(key("0xff0d"), 0xff0d, "hex keysym");
	is_int(key("a"), 'a', "a");
	is_int(key("A"), 'A', "A");
	is_int(key("é"), 0xe9, "latin-1 char");
	is_int(key("你"), 0x01000000 + 0x4f60, "cjk char");
	is_int(key("ctrl"), XK_Control_L, "ctrl");
	is_int(key("Ctrl"), XK_Control_L, "Ctrl");
	is_int(key("alt"), XK_Alt_L, "alt");
	is_int(key("shift"), XK_Shift_L, "shift");
	is_int(key("super"), XK_Super_L, "super");
	is_int(key("win"), XK_Super_L, "win");
	is_int(key("cmd"), XK_Super_L, "cmd");
	is_int(key("meta"), XK_Meta_L, "meta is xdotool's Meta");
	is_int(key("esc"), XK_Escape, "esc");
	is_int(key("del"), XK_Delete, "del");
	is_int(key("Delete"), XK_Delete, "Delete");
	is_int(key("bksp"), XK_BackSpace, "bksp");
	is_int(key("BackSpace"), XK_BackSpace, "BackSpace");
	is_int(key("pgup"), XK_Prior, "pgup");
	is_int(key("PageDown"), XK_Next, "PageDown");
	is_int(key("up"), XK_Up, "up");
	is_int(key("space"), XK_space, "space");
	is_int(key("tab"), XK_Tab, "tab");
	is_int(key("home"), XK_Home, "home");
	is_int(key("end"), XK_End, "end");
	is_int(key("ins"), XK_Insert, "ins");
	is_int(key("plus"), XK_plus, "plus");
	is_int(key("minus"), XK_minus, "minus");
	uint32_t k;
	ok(input_keysym_parse("nosuchkey", &k, &e) == -EINVAL && e.kind == ERR_INVALID,
	   "unknown key rejected");
	is_str(e.msg, "unknown key 'nosuchkey'", "unknown key message");
	ok(input_keysym_parse("", &k, &e) < 0, "empty key rejected");
	ok(input_keysym_parse("\xc3", &k, &e) < 0, "truncated utf-8 key rejected");
	ok(input_keysym_parse("0x", &k, &e) < 0, "bare 0x rejected");
	ok(input_keysym_parse("0x123456789", &k, &e) < 0, "huge hex rejected");
	ok(input_keysym_parse(
	       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", &k, &e) < 0,
	   "long name rejected");

	/* Combos and sequences */
	struct input_seq s = {0};
	ok(input_seq_keys(&s, "ctrl+shift+t", &e) == 0, "combo parses");
	is_str(render(&s), "+ffe3 +ffe1 +74 -74 -ffe1 -ffe3", "combo press order, reverse release");
	input_seq_release(&s);
	ok(input_seq_keys(&s, "ctrl+a Delete", &e) == 0, "sequence parses");
	is_str(render(&s), "+ffe3 +61 -61 -ffe3 +ffff -ffff", "sequence");
	input_seq_release(&s);
	ok(input_seq_keys(&s, "ctrl+plus", &e) == 0, "ctrl+plus");
	is_str(render(&s), "+ffe3 +2b -2b -ffe3", "ctrl+plus keys");
	input_seq_release(&s);
	ok(input_seq_keys(&s, "shift+1 ctrl+shift+minus shift+space", &e) == 0, "shifted digits");
	is_str(render(&s),
	       "+ffe1 +21 -21 -ffe1 +ffe3 +ffe1 +5f -5f -ffe1 -ffe3 +ffe1 +20 -20 -ffe1",
	       "shift+1 sends \"!\", ctrl+shift+minus \"_\", shift+space a space");
	input_seq_release(&s);
	ok(input_seq_keys_dir(&s, "shift+slash", 1, &e) == 0 &&
	       input_seq_keys_dir(&s, "shift+slash", 0, &e) == 0,
	   "held shift+slash");
	is_str(render(&s), "+ffe1 +3f -3f -ffe1", "held shift+slash is \"?\" down and up");
	input_seq_release(&s);
	ok(input_seq_keys(&s, "+", &e) == 0, "lone + is the plus key");
	input_seq_release(&s);
	ok(input_seq_keys(&s, "ctrl++", &e) < 0, "ctrl++ rejected");
	ok(input_seq_keys(&s, "ctrl+bogus", &e) < 0, "unknown in combo rejected");
	ok(input_seq_keys(&s, "   ", &e) < 0, "blank rejected");
	input_seq_release(&s);
	ok(input_seq_keys_dir(&s, "ctrl+alt", 1, &e) == 0, "keys_dir down");
	ok(input_seq_keys_dir(&s, "ctrl+alt", 0, &e) == 0, "keys_dir up");
	is_str(render(&s), "+ffe3 +ffe9 -ffe9 -ffe3", "hold presses then reverse releases");
	ok(input_seq_keys_dir(&s, "ctrl a", 1, &e) < 0, "keys_dir rejects sequence");
	input_seq_release(&s);

	/* Text */
	const char *text = "héllo 你好 ✓ ÄÖÜß € 😀\n\t";
	ok(input_seq_text(&s, text, strlen(text), &e) == 0, "unicode text parses");
	is_str(
	    render(&s),
	    "+68 -68 +e9 -e9 +6c -6c +6c -6c +6f -6f +20 -20 +1004f60 -1004f60 +100597d -100597d "
	    "+20 -20 +1002713 -1002713 +20 -20 +c4 -c4 +d6 -d6 +dc -dc +df -df +20 -20 "
	    "+10020ac -10020ac +20 -20 +101f600 -101f600 +ff0d -ff0d +ff09 -ff09",
	    "unicode text keysyms exact");
	input_seq_release(&s);
	ok(input_seq_text(&s, "a\r\nb", 4, &e) == 0, "crlf");
	is_str(render(&s), "+61 -61 +ff0d -ff0d +62 -62", "crlf is one Return");
	input_seq_release(&s);

	static const struct {
		const char *s;
		size_t len;
		const char *msg;
	} bad[] = {
	    {"ab\xc0\xafz", 5, "invalid utf-8 at byte offset 2"},      /* overlong '/' */
	    {"\xe0\x80\xaf", 3, "invalid utf-8 at byte offset 0"},     /* overlong 3-byte */
	    {"x\xed\xa0\x80", 4, "invalid utf-8 at byte offset 1"},    /* surrogate */
	    {"\xf4\x90\x80\x80", 4, "invalid utf-8 at byte offset 0"}, /* > U+10FFFF */
	    {"ok\xe4\xbd", 4, "invalid utf-8 at byte offset 2"},       /* truncated */
	    {"\x80", 1, "invalid utf-8 at byte offset 0"},	       /* stray continuation */
	    {"a\0b", 3, "control character U+0000 at byte offset 1"},
	    {"a\x1b", 2, "control character U+001B at byte offset 1"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err_clear(&e);
		ok(input_seq_text(&s, bad[i].s, bad[i].len, &e) < 0 && e.kind == ERR_INVALID,
		   "invalid text rejected");
		is_str(e.msg, bad[i].msg, "error names the offset");
		input_seq_release(&s);
	}

	/* Buttons and clicks */
	enum input_button b;
	ok(input_button_parse("left", &b, &e) == 0 && b == INPUT_BUTTON_LEFT, "left");
	ok(input_button_parse("Right", &b, &e) == 0 && b == INPUT_BUTTON_RIGHT, "Right");
	ok(input_button_parse("wheel", &b, &e) == 0 && b == INPUT_BUTTON_MIDDLE, "wheel");
	ok(input_button_parse("back", &b, &e) == 0 && b == 8, "back");
	ok(input_button_parse("forward", &b, &e) < 0, "forward cannot be sent");
	ok(input_button_parse("nope", &b, &e) < 0, "unknown button");
	uint32_t mods[] = {XK_Control_L, XK_Shift_L};
	ok(input_seq_click(&s, 10, 20, INPUT_BUTTON_LEFT, 2, mods, 2, &e) == 0, "click");
	is_str(render(&s), "m10,20 +ffe3 +ffe1 +b1 -b1 p50 +b1 -b1 -ffe1 -ffe3",
	       "double click with mods");
	ok(input_seq_click(&s, 10, 20, INPUT_BUTTON_LEFT, 4, NULL, 0, &e) < 0, "count 4 rejected");
	ok(input_seq_click(&s, 10, 20, 9, 1, NULL, 0, &e) < 0, "button 9 rejected");
	input_seq_release(&s);
	return done();
}
