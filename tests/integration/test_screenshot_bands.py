"""Screenshots encoded band by band and cached per frame, checked against
the X server itself: the root window inside the sandbox gets random
rectangles (damage of every size, one to four per round), and after each
round the PNG screenshot (encoded incrementally from the bands the mirror
saw change) is decoded here (every CRC and the zlib Adler-32 checked,
filters undone) and compared pixel by pixel with `xwd -root` taken inside
the sandbox.  The screen is a palette PNG while it has at most 256
colours; a round paints 300 more, after which it is R,G,B (the partial
encode is refused and redone whole).  A repeat request for the same frame
returns the same bytes.  WebP,
lossless and lossy, is chosen by `format=` or the Accept header."""

import os
import random
import subprocess
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import dbx  # noqa: E402

W, H = 640, 400
ROUNDS = 10
CTYPES = set()  # PNG colour types compared: 2 R,G,B, 3 palette

# Fills rectangles ("x y w h 0xRRGGBB" on stdin) straight onto the root
# window through libX11 (ctypes: no toolkit needed inside the sandbox).
PAINTER = r"""
import ctypes, sys
x = ctypes.CDLL("libX11.so.6")
x.XOpenDisplay.restype = ctypes.c_void_p
x.XDefaultRootWindow.restype = ctypes.c_ulong
x.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
x.XCreateGC.restype = ctypes.c_void_p
x.XCreateGC.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_void_p]
x.XSetForeground.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_ulong]
x.XFillRectangle.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p] + [ctypes.c_int] * 2 + [ctypes.c_uint] * 2
x.XSync.argtypes = [ctypes.c_void_p, ctypes.c_int]
d = x.XOpenDisplay(None)
root = x.XDefaultRootWindow(d)
gc = x.XCreateGC(d, root, 0, None)
for line in sys.stdin:
    rx, ry, rw, rh, col = line.split()
    x.XSetForeground(d, gc, int(col, 16))
    x.XFillRectangle(d, root, gc, int(rx), int(ry), int(rw), int(rh))
x.XSync(d, 0)
"""


def paint(srv, sid, rects):
    res = srv.exec(sid, ["python3", "/tmp/painter.py"], timeout_s=60,
                   stdin="".join("%d %d %d %d 0x%06x\n" % r for r in rects))
    return res


def xwd_pixels(data):
    """Rows of R,G,B bytes from a 32-bit ZPixmap XWD dump."""
    f = struct.unpack(">25I", data[:100])
    hsize, width, height = f[0], f[4], f[5]
    byte_order, bpp, bpl, ncolors = f[7], f[11], f[12], f[19]
    rmask, gmask, bmask = f[14], f[15], f[16]
    assert bpp == 32 and (rmask, gmask, bmask) == (0xff0000, 0xff00, 0xff), f
    off = hsize + ncolors * 12
    rows = []
    for y in range(height):
        row = data[off + y * bpl: off + y * bpl + width * 4]
        if byte_order == 0:  # LSBFirst: B, G, R, X
            r, g, b = row[2::4], row[1::4], row[0::4]
        else:
            r, g, b = row[1::4], row[2::4], row[3::4]
        out = bytearray(width * 3)
        out[0::3], out[1::3], out[2::3] = r, g, b
        rows.append(bytes(out))
    return rows


def cursor(t, srv, sid):
    """cursor=1 through the incremental encoder: after the pointer moved
    (no new frame), the bands under the old pointer are redone, so the
    picture differs from the cursor=0 one only around the new position."""
    srv.post(sid, "wait", {"until": "stable", "quiet_ms": 300, "timeout_ms": 10000})
    old, new = (100, 100), (400, 300)
    srv.post(sid, "move", {"x": old[0], "y": old[1]})
    dbx.wait_until(lambda: srv.request("GET", "/v1/sandboxes/%s/desktop/info" % sid)
                   .json()["pointer"] == {"x": old[0], "y": old[1]}, timeout=10)
    shot(srv, sid, "?cursor=1")
    srv.post(sid, "move", {"x": new[0], "y": new[1]})
    dbx.wait_until(lambda: srv.request("GET", "/v1/sandboxes/%s/desktop/info" % sid)
                   .json()["pointer"] == {"x": new[0], "y": new[1]}, timeout=10)
    with_cursor, f1 = shot(srv, sid, "?cursor=1")
    without, f2 = shot(srv, sid)
    if f1 != f2:
        t.skip("cursor drawn incrementally", "the screen changed meanwhile")
        return
    a, b = dbx.png_pixels(with_cursor), dbx.png_pixels(without)
    diff = [(x, y) for y in range(H) if a[y] != b[y]
            for x in range(W) if a[y][x * 3:x * 3 + 3] != b[y][x * 3:x * 3 + 3]]
    if not diff:
        t.skip("cursor drawn incrementally", "the VNC server sent no cursor shape")
        return
    near = all(abs(x - new[0]) <= 64 and abs(y - new[1]) <= 64 for x, y in diff)
    t.ok(near, "cursor=1 after a pointer move shows the pointer only at its new place",
         "differing pixels from %r to %r" % (min(diff), max(diff)))


def formats(t, srv, base):
    """WebP (lossless and lossy), chosen by the query or the Accept header."""
    def get(query, accept=None):
        return srv.request("GET", base + "/desktop/screenshot" + query,
                           headers={"Accept": accept} if accept else None)
    r = get("?format=webp")
    t.ok(r.status == 200 and r.header("Content-Type") == "image/webp" and
         r.body[:4] == b"RIFF" and r.body[8:16] == b"WEBPVP8L", "format=webp is lossless WebP",
         (r.status, r.header("Content-Type"), r.body[:16]))
    r = get("?format=webp&lossless=0&quality=40")
    t.ok(r.status == 200 and r.body[8:16] == b"WEBPVP8 ", "lossless=0 is lossy WebP",
         (r.status, r.body[:16]))
    for accept, want in (("image/webp,image/png;q=0.9", "image/webp"),
                         ("image/jpeg, */*", "image/jpeg"), ("*/*", "image/png"),
                         ("text/html, image/png, image/webp", "image/png")):
        r = get("", accept)
        t.eq((r.status, r.header("Content-Type")), (200, want), "Accept: %s" % accept)
    t.eq(r.header("Vary"), "Accept", "the answer says it varies with Accept")
    r = get("?format=png", "image/webp")
    t.eq(r.header("Content-Type"), "image/png", "format= wins over Accept")
    t.eq(get("?lossless=2").status, 400, "lossless=2 is refused")
    t.eq(get("?format=gif").status, 400, "format=gif is refused")


def zlib_level(t):
    """--png-level 9: zlib instead of the one-pass deflate, the same pixels,
    smaller files; a level out of 1-9 is refused by name."""
    for bad in ("0", "10", "x"):
        p = subprocess.run([os.path.join(dbx.BUILD, "deskboxd"), "--png-level", bad],
                           capture_output=True, text=True, timeout=30)
        t.ok(p.returncode == 2 and "--png-level" in p.stderr,
             "--png-level %s is refused naming the option" % bad, p.stderr)
    sizes = {}
    for level in ("1", "9"):
        srv = dbx.Server(args=["--png-level", level])
        try:
            sid = srv.create({"display": {"width": W, "height": H}})["id"]
            srv.exec(sid, ["sh", "-c", "cat > /tmp/painter.py"], stdin=PAINTER)
            paint(srv, sid, [(0, 0, W, H, 0x202020)])
            compared, mismatched = rounds(t, srv, sid, random.Random(9), 4)
            t.ok(compared >= 3 and mismatched == 0,
                 "--png-level %s: %d rounds, every PNG the X server's pixels" % (level, compared),
                 mismatched)
            srv.post(sid, "wait", {"until": "stable", "quiet_ms": 300, "timeout_ms": 10000})
            sizes[level] = len(shot(srv, sid, "?x=0&y=0&w=%d&h=%d" % (W, H))[0])
        finally:
            srv.cleanup()
    t.ok(sizes.get("9", 1 << 30) < sizes.get("1", 0),
         "level 9's PNG of the same screen is smaller (%s)" % sizes)


def main():
    t = dbx.Tap()
    srv = dbx.Server()
    try:
        run(t, srv)
    finally:
        srv.cleanup()
    zlib_level(t)
    t.done()


def shot(srv, sid, query=""):
    r = srv.request("GET", "/v1/sandboxes/%s/desktop/screenshot%s" % (sid, query))
    if r.status != 200:
        raise RuntimeError("screenshot: %d %s" % (r.status, r.body[:300]))
    return r.body, int(r.header("X-Frame"))


def rounds(t, srv, sid, rng, n, region=None, first=None):
    """`n` rounds of random rectangles (the first round paints `first`
    instead when given), each followed by a PNG of the screen (or of
    `region` (x, y, w, h), not aligned to any band) compared with the X
    server's.  Returns (rounds compared, rounds that differ)."""
    base = "/v1/sandboxes/%s" % sid
    query = "?x=%d&y=%d&w=%d&h=%d" % region if region else ""
    compared = mismatched = 0
    for rnd in range(n):
        rects = []
        for _ in range(0 if first and rnd == 0 else rng.randint(1, 4)):
            big = rng.random() < 0.25
            w = rng.randint(1, W if big else 60)
            h = rng.randint(1, H if big else 24)
            x, y = rng.randint(0, W - w), rng.randint(0, H - h)
            rects.append((x, y, w, h, rng.getrandbits(24)))
        res = paint(srv, sid, first if first and rnd == 0 else rects)
        if res["exit_code"] != 0:
            t.diag("round %d: painter: %s" % (rnd, res["stderr"]))
        for _attempt in range(5):
            srv.post(sid, "wait", {"until": "stable", "quiet_ms": 300, "timeout_ms": 10000})
            png, f1 = shot(srv, sid, query)
            srv.exec(sid, ["sh", "-c", "xwd -root -silent > /workspace/root.xwd"])
            png2, f2 = shot(srv, sid, query)
            if f1 == f2:
                break
        if f1 != f2:
            t.diag("round %d: the screen kept changing" % rnd)
            continue
        if rnd == 0 and not region:
            t.ok(png2 == png, "a repeat for the same frame returns the same bytes")
        got = dbx.png_pixels(png)
        CTYPES.add(dbx.png_info(png)[3])
        xr = srv.request("GET", base + "/files/download?path=/workspace/root.xwd")
        want = xwd_pixels(xr.body)
        if region:
            x, y, w, h = region
            want = [row[x * 3:(x + w) * 3] for row in want[y:y + h]]
        if got != want:
            # The mirror follows the X server through VNC: on a loaded
            # machine an update can arrive after the quiet time.  Only a
            # PNG that still differs once the mirror caught up (a new
            # frame, a new xwd) or for the same frame counts.
            got, want, f3 = again(srv, sid, query, region)
            t.diag("round %d: differed; again after a longer quiet: frame %d -> %d, %s" %
                   (rnd, f1, f3, "equal" if got == want else "still differs"))
        compared += 1
        if got != want:
            mismatched += 1
            bad = [y for y in range(len(want)) if y >= len(got) or got[y] != want[y]]
            t.diag("round %d: %d rows differ, first %d" % (rnd, len(bad), bad[0]))
    return compared, mismatched


def again(srv, sid, query, region):
    """The PNG's and the X server's pixels once more, after a longer quiet."""
    srv.post(sid, "wait", {"until": "stable", "quiet_ms": 1500, "timeout_ms": 15000})
    png, f3 = shot(srv, sid, query)
    srv.exec(sid, ["sh", "-c", "xwd -root -silent > /workspace/root.xwd"])
    xr = srv.request("GET", "/v1/sandboxes/%s/files/download?path=/workspace/root.xwd" % sid)
    want = xwd_pixels(xr.body)
    if region:
        x, y, w, h = region
        want = [row[x * 3:(x + w) * 3] for row in want[y:y + h]]
    return dbx.png_pixels(png), want, f3


def run(t, srv):
    sb = srv.create({"display": {"width": W, "height": H}})
    sid = sb["id"]
    base = "/v1/sandboxes/%s" % sid
    srv.exec(sid, ["sh", "-c", "cat > /tmp/painter.py"], stdin=PAINTER)
    res = paint(srv, sid, [(0, 0, W, H, 0x202020)])
    if not t.eq(res["exit_code"], 0, "the painter fills the root window"):
        t.diag(res["stderr"])
        return
    rng = random.Random(15)
    compared, mismatched = rounds(t, srv, sid, rng, ROUNDS)
    t.ok(compared >= ROUNDS - 2, "compared %d of %d rounds" % (compared, ROUNDS))
    t.eq(mismatched, 0, "every incremental PNG decodes to the X server's pixels")
    compared, mismatched = rounds(t, srv, sid, rng, 6, region=(37, 21, 411, 301))
    t.ok(compared >= 4, "compared %d of 6 region rounds" % compared)
    t.eq(mismatched, 0, "an incremental PNG of a region off the band grid is right too")
    t.eq(CTYPES, {3}, "a screen of few colours comes as a palette PNG")
    CTYPES.clear()
    # 300 pixels of new colours (a small change): past the palette.
    CTYPES.clear()
    dots = [(3 + (i % 100) * 5, 250 + (i // 100) * 5, 1, 1, 0x010203 * (i + 7))
            for i in range(300)]
    compared, mismatched = rounds(t, srv, sid, rng, 4, first=dots)
    t.ok(compared >= 3, "compared %d of 4 rounds past 256 colours" % compared)
    t.eq(mismatched, 0, "past 256 colours the PNG is R,G,B and right")
    t.ok(2 in CTYPES, "R,G,B PNGs were compared too", sorted(CTYPES))
    cursor(t, srv, sid)
    formats(t, srv, base)
    m = srv.request("GET", "/metrics")
    t.ok(m.status != 200 or b"deskbox_screenshot_encode_seconds" in m.body,
         "screenshots are measured")


if __name__ == "__main__":
    main()
