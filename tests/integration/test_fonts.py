"""The default image's desktop shows every script: fontconfig inside a
sandbox finds a font for CJK, Hangul, Arabic, Hebrew, Devanagari, Thai,
Greek, Cyrillic and emoji, and Chromium in the sandbox draws each sample as
glyphs, not as the boxes it draws for characters no font has (U+1F10D; two
such characters draw the same boxes, the control), and the emoji in
colour.  One page, one Chromium run: each sample and its boxes on rows."""

import os
import struct
import sys
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

SAMPLES = [
    ("Chinese", "你好世界", 0x4F60),
    ("Japanese", "日本語テキスト", 0x30C6),
    ("Korean", "한국어", 0xD55C),
    ("Arabic", "مرحبا", 0x0645),
    ("Hebrew", "שלום", 0x05E9),
    ("Devanagari", "नमस्ते", 0x0928),
    ("Thai", "สวัสดี", 0x0E2A),
    ("Greek", "Καλημέρα", 0x039A),
    ("Cyrillic", "Привет", 0x041F),
    ("emoji", "😀🎉", 0x1F600),
]
# Assigned (Unicode 13), in no font here: Chromium's box for a missing glyph.
NO_GLYPH = "\U0001F10D"
# Another character no font has: drawn as the same boxes (the control).
NO_GLYPH_TOO = "\u2FF0"
CHROMIUM = "/usr/lib/chromium/chromium"


def rgb_rows(data):
    """An 8-bit RGB or RGBA PNG (any filter) into rows of (r, g, b)."""
    w, h, depth, ctype = struct.unpack(">IIBB", data[16:26])
    if depth != 8 or ctype not in (2, 6):
        raise ValueError("PNG colour type %d depth %d" % (ctype, depth))
    bpp = 3 if ctype == 2 else 4
    raw, pos = b"", 8
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            raw += data[pos + 8:pos + 8 + n]
        pos += 12 + n
    raw = zlib.decompress(raw)
    stride, rows, prev = w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        f, cur = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = cur[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                cur[i] = (cur[i] + a) & 255
            elif f == 2:
                cur[i] = (cur[i] + b) & 255
            elif f == 3:
                cur[i] = (cur[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                cur[i] = (cur[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(cur[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = cur
    return rows


ROW_PX = 60


def render(srv, sid, lines):
    """Chromium (headless, in the sandbox, as its user) draws `lines`, one
    per ROW_PX-high row; returns each row's pixels."""
    rows = "".join("<div style='height:%dpx;overflow:hidden;white-space:nowrap'>%s</div>" %
                   (ROW_PX, text) for text in lines)
    html = ("<html><head><meta charset='utf-8'></head><body style='margin:0;background:#fff;"
            "font-size:40px;line-height:%dpx'>%s</body></html>" % (ROW_PX, rows))
    r = srv.request("PUT", "/v1/sandboxes/%s/files/upload?path=/tmp/fonts.html" % sid,
                    html.encode())
    if r.status != 201:
        raise RuntimeError("upload: %d %s" % (r.status, r.body[:200]))
    png = "/tmp/fonts.png"
    # --screenshot writes the file and then the browser lingers: the file
    # is waited for, then the browser ended.
    script = ("%s --headless=new --no-sandbox --hide-scrollbars --disable-gpu "
              "--user-data-dir=/tmp/chromium-fonts --window-size=600,%d "
              "--virtual-time-budget=3000 --screenshot=%s file:///tmp/fonts.html "
              ">/tmp/fonts.log 2>&1 & "
              "p=$!; n=0; while ! [ -s %s ] && kill -0 $p 2>/dev/null && [ $n -lt 600 ]; do "
              "sleep 0.1; n=$((n+1)); done; sleep 0.3; kill -9 $p 2>/dev/null; wait; test -s %s" %
              (CHROMIUM, ROW_PX * len(lines) + 100, png, png, png))
    res = srv.exec(sid, ["sh", "-c", script], timeout_s=90)
    if res["exit_code"] != 0:
        raise RuntimeError("chromium drew nothing: " +
                           srv.exec(sid, ["cat", "/tmp/fonts.log"])["stdout"][-500:])
    pixels = rgb_rows(srv.request("GET", "/v1/sandboxes/%s/files/download?path=%s" %
                                  (sid, png)).body)
    return [pixels[i * ROW_PX:(i + 1) * ROW_PX] for i in range(len(lines))]


def ink(rows):
    return sum(1 for row in rows for p in row if p != (255, 255, 255))


def coloured(rows):
    """Pixels that are clearly not grey (a channel 60 off another)."""
    return sum(1 for row in rows for p in row if max(p) - min(p) > 60)


def main():
    dbx.require_root_and_tools()
    if not os.access(CHROMIUM, os.X_OK):
        dbx.skip_all("no Chromium at %s (Debian: chromium)" % CHROMIUM)
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        sid = srv.create()["id"]
        for name, _, cp in SAMPLES:
            out = srv.exec(sid, ["fc-list", ":charset=%x" % cp, "family"])["stdout"].strip()
            t.ok(out != "", "fontconfig in the sandbox has a font for %s (U+%04X)" % (name, cp),
                 out.splitlines()[:2])
        # Each sample, then as many missing-glyph boxes, on rows of one page.
        lines = []
        for _, text, _ in SAMPLES:
            lines += [text, NO_GLYPH * len(text)]
        lines.append(NO_GLYPH_TOO * 4)
        rows = render(srv, sid, lines)
        t.ok(ink(rows[-1]) > 50 and rows[-1] == rows[1],
             "control: two characters no font has draw as the same boxes",
             (ink(rows[-1]), ink(rows[1])))
        t.diag("missing-glyph boxes: %s pixels of ink" %
               [ink(rows[2 * i + 1]) for i in range(len(SAMPLES))])
        for i, (name, _, _) in enumerate(SAMPLES):
            drawn, boxes = rows[2 * i], rows[2 * i + 1]
            t.ok(ink(drawn) > 50 and ink(boxes) > 50 and drawn != boxes,
                 "Chromium draws %s as glyphs, not as missing-glyph boxes" % name,
                 (ink(drawn), ink(boxes)))
            if name == "emoji":
                t.ok(coloured(drawn) > 100 and coloured(boxes) == 0,
                     "the emoji are in colour", (coloured(drawn), coloured(boxes)))
        srv.request("DELETE", "/v1/sandboxes/" + sid)
    finally:
        srv.cleanup()
    t.done()


if __name__ == "__main__":
    main()
