"""Screenshot figures for make bench (scripts/bench.py): four scenes (an
empty desktop, a terminal full of text with a clock, a browser showing a
page, noise), each with a full change and a small change (one word), at
1280x800 and 1920x1080, each against ImageMagick's `import -window root`
run inside the same sandbox in the same run; plus the cost of asking again
for the same frame.  BENCH_SCENES=text,noise picks scenes.

A timed screenshot follows a screenshot of the previous state, so the
incremental encoder's work is what the change requires: all bands for a
full change, one or two for a word.  BENCH_SIZES=1280 picks sizes.

The times are a Python http.client request each (a new connection, as an
agent's client makes); the repeat of the same frame is also timed with
curl (its own time_total, a new connection each: Connection: close) in the
same run, which shows how much of a large image's time is the Python
client reading it."""

import os
import shutil
import subprocess
import time

# Fills rectangles ("x y w h 0xRRGGBB" lines on stdin, "noise" for random
# pixels over the whole screen) on the root window through libX11.
PAINTER = r"""
import ctypes, os, sys
x = ctypes.CDLL("libX11.so.6")
P, U = ctypes.c_void_p, ctypes.c_ulong
x.XOpenDisplay.restype = P
x.XDefaultRootWindow.restype = U; x.XDefaultRootWindow.argtypes = [P]
x.XDefaultScreen.argtypes = [P]
x.XDefaultVisual.restype = P; x.XDefaultVisual.argtypes = [P, ctypes.c_int]
x.XDisplayWidth.argtypes = x.XDisplayHeight.argtypes = [P, ctypes.c_int]
x.XCreateGC.restype = P; x.XCreateGC.argtypes = [P, U, U, P]
x.XSetForeground.argtypes = [P, P, U]
x.XFillRectangle.argtypes = [P, U, P, ctypes.c_int, ctypes.c_int, ctypes.c_uint, ctypes.c_uint]
x.XCreateImage.restype = P
x.XCreateImage.argtypes = [P, P, ctypes.c_uint, ctypes.c_int, ctypes.c_int, ctypes.c_char_p,
                           ctypes.c_uint, ctypes.c_uint, ctypes.c_int, ctypes.c_int]
x.XPutImage.argtypes = [P, U, P, P] + [ctypes.c_int] * 4 + [ctypes.c_uint] * 2
x.XSync.argtypes = [P, ctypes.c_int]
d = x.XOpenDisplay(None)
scr = x.XDefaultScreen(d)
root = x.XDefaultRootWindow(d)
gc = x.XCreateGC(d, root, 0, None)
for line in sys.stdin:
    if line.strip() == "noise":
        w, h = x.XDisplayWidth(d, scr), x.XDisplayHeight(d, scr)
        buf = ctypes.create_string_buffer(os.urandom(w * h * 4), w * h * 4)
        img = x.XCreateImage(d, x.XDefaultVisual(d, scr), 24, 2, 0, buf, w, h, 32, 0)
        x.XPutImage(d, root, gc, img, 0, 0, 0, 0, w, h)
        continue
    rx, ry, rw, rh, col = line.split()
    x.XSetForeground(d, gc, int(col, 16))
    x.XFillRectangle(d, root, gc, int(rx), int(ry), int(rw), int(rh))
x.XSync(d, 0)
"""

PAGE = """<!doctype html><html><head><title>bench page %d</title><style>
body{font:15px sans-serif;margin:24px;background:#fafafa;color:#222}
h1{color:#1a4d8f} .card{background:#fff;border:1px solid #ddd;padding:12px;margin:10px 0}
input{font-size:18px;width:400px}</style></head><body>
<h1>Quarterly report %d</h1><input id=q autofocus placeholder="search">
%s<script>
/* F8 opens the other page: a full change without an address bar (kiosk). */
document.addEventListener("keydown", e => {
  if (e.key === "F8") location.href = "/p%d.html";
});
</script></body></html>"""

WORDS = ("alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega "
         "report revenue margin growth region customer product channel").split()


def page(k):
    cards = []
    for i in range(14):
        text = " ".join(WORDS[(i * 7 + j * 3 + k) % len(WORDS)] for j in range(40))
        cards.append("<div class=card><b>Item %d.%d</b> %s</div>" % (k, i, text))
    return PAGE % (k, k, "\n".join(cards), 1 - k)


class Scene:
    def __init__(self, srv, sid, w, h):
        self.srv, self.sid, self.w, self.h = srv, sid, w, h
        self.flip = 0

    def sh(self, cmd, **kw):
        return self.srv.exec(self.sid, ["sh", "-c", cmd], timeout_s=120, **kw)

    def paint(self, lines):
        return self.srv.exec(self.sid, ["python3", "/tmp/painter.py"], timeout_s=60,
                             stdin="".join(l + "\n" for l in lines))

    def settle(self, quiet_ms=250):
        self.srv.post(self.sid, "wait", {"until": "stable", "quiet_ms": quiet_ms,
                                         "timeout_ms": 8000})

    def word_rect(self):
        """A word-sized change (60x13 pixels) at a spot that alternates."""
        self.flip ^= 1
        return "%d %d 60 13 0x%06x" % (self.w // 3, self.h // 2, 0x3070b0 if self.flip
                                       else 0x202020)


def shot_ms(srv, sid, query=""):
    t0 = time.perf_counter()
    srv.screenshot(sid, query)
    return (time.perf_counter() - t0) * 1000


def measure(sc, change, n, quiet_ms=250):
    """Median-ready times of a screenshot after `change()` (a screenshot of
    the state before it was taken, so only the change is new)."""
    out = []
    for i in range(n):
        sc.srv.screenshot(sc.sid)
        change(i)
        sc.settle(quiet_ms)
        out.append(shot_ms(sc.srv, sc.sid))
    return out


def setup_empty(sc):
    sc.paint(["0 0 %d %d 0x202020" % (sc.w, sc.h)])
    full = lambda i: sc.paint(["0 0 %d %d 0x%06x" % (sc.w, sc.h, 0x304050 if i % 2  # noqa
                                                     else 0x202020)])
    small = lambda i: sc.paint([sc.word_rect()])  # noqa: E731
    return full, small, 250


def setup_noise(sc):
    sc.paint(["noise"])
    full = lambda i: sc.paint(["noise"])  # noqa: E731
    small = lambda i: sc.paint([sc.word_rect()])  # noqa: E731
    return full, small, 250


def setup_text(sc):
    """A full-screen xterm with an interactive shell and a page of text,
    a digital clock ticking every second in the corner."""
    # The terminal leaves the top right corner to the clock, and room for
    # its title bar so that its last line (the prompt) is on the screen.
    cols, rows = (sc.w - 4 - 140) // 6, (sc.h - 4 - 40) // 13
    for k in range(2):
        text = "\n".join(" ".join(WORDS[(r * 5 + j + k * 3) % len(WORDS)]
                                  for j in range(cols // 7)) for r in range(rows + 5))
        sc.srv.exec(sc.sid, ["sh", "-c", "cat > /tmp/page%d.txt" % k], stdin=text + "\n")
    sc.srv.exec(sc.sid, ["xterm", "-fn", "fixed", "-geometry", "%dx%d+0+0" % (cols, rows),
                         "-e", "sh"], background=True, env={"PS1": "$ "})
    sc.srv.exec(sc.sid, ["xclock", "-digital", "-strftime", "%H:%M:%S", "-update", "1",
                         "-geometry", "120x30-0+0"], background=True)
    time.sleep(2.0)
    sc.srv.post(sc.sid, "click", {"x": sc.w // 2, "y": sc.h // 2})
    sc.srv.post(sc.sid, "type_text", {"text": "cat /tmp/page0.txt\n"})
    sc.settle()

    def full(i):
        sc.srv.post(sc.sid, "type_text", {"text": "clear; cat /tmp/page%d.txt\n" % (i % 2)})

    def small(i):
        sc.srv.post(sc.sid, "type_text", {"text": WORDS[i % len(WORDS)] + " "})
    return full, small, 200


def setup_browser(sc):
    """Chromium showing a page from python3 -m http.server in the sandbox;
    None when it does not come up."""
    for k in range(2):
        sc.srv.exec(sc.sid, ["sh", "-c", "mkdir -p /tmp/www; cat > /tmp/www/p%d.html" % k],
                    stdin=page(k))
    sc.srv.exec(sc.sid, ["sh", "-c", "cd /tmp/www && exec python3 -m http.server 8123 "
                         "--bind 127.0.0.1"], background=True)
    sc.srv.exec(sc.sid, ["/usr/lib/chromium/chromium", "--no-sandbox", "--no-first-run",
                         "--user-data-dir=/tmp/c", "--disable-gpu", "--kiosk",
                         "--window-position=0,0", "--window-size=%d,%d" % (sc.w, sc.h),
                         "http://127.0.0.1:8123/p0.html"], background=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        r = sc.sh("xdotool search --name 'bench page' 2>/dev/null | head -1")
        if r["stdout"].strip():
            break
        time.sleep(0.5)
    else:
        return None
    sc.settle(1000)

    def full(i):
        sc.srv.post(sc.sid, "key", {"keys": "F8"})
        # Until the other page is shown (its title names it).
        deadline = time.time() + 10
        while time.time() < deadline and not sc.sh(
                "xdotool search --name 'bench page %d' 2>/dev/null" % ((i + 1) % 2))["stdout"]:
            time.sleep(0.1)

    def small(i):
        sc.srv.post(sc.sid, "type_text", {"text": WORDS[i % len(WORDS)] + " "})
    sc.srv.post(sc.sid, "click", {"x": 200, "y": 80})
    return full, small, 400


SCENES = [("empty", setup_empty), ("text", setup_text), ("browser", setup_browser),
          ("noise", setup_noise)]


def run(srv, report, quick):
    n = 5 if quick else 9
    medians = {}
    sizes = [(w, h) for w, h in ((1280, 800), (1920, 1080))
             if not os.environ.get("BENCH_SIZES") or str(w) in os.environ["BENCH_SIZES"]]
    for w, h in sizes:
        for name, setup in SCENES:
            if os.environ.get("BENCH_SCENES") and name not in os.environ["BENCH_SCENES"]:
                continue
            sid = srv.create({"display": {"width": w, "height": h}})["id"]
            try:
                sc = Scene(srv, sid, w, h)
                srv.exec(sid, ["sh", "-c", "cat > /tmp/painter.py"], stdin=PAINTER)
                got = setup(sc)
                if got is None:
                    print("# %s %dx%d skipped: chromium did not show the page in 60 s"
                          % (name, w, h))
                    continue
                full, small, quiet = got
                label = "shot %s %dx%d" % (name, w, h)
                fulls = measure(sc, full, n, quiet)
                smalls = measure(sc, small, n, quiet)
                sc.settle(quiet)
                sc.srv.screenshot(sid)
                repeat = [shot_ms(srv, sid) for _ in range(n)]
                repeat_curl = curl_ms(srv, sid, n)
                naive = inner_import(srv, sid, 3)
                big = w > 1280
                report(label + " full change", fulls, naive=naive, naive_name="import",
                       target=None if big else {"empty": "<= 8 ms", "text": "<= 8 ms",
                                                "browser": "<= 12 ms",
                                                "noise": "<= 25 ms"}[name] + ", >= 15x")
                report(label + " small change", smalls, naive=naive, naive_name="import",
                       target=None if big else "<= 3 ms, >= 25x")
                report(label + " repeat same frame", repeat, naive=naive, naive_name="import",
                       target=None if big else "<= 1 ms")
                if repeat_curl:
                    report(label + " repeat same frame (curl)", repeat_curl, naive=repeat,
                           naive_name="python")
                for kind, vals in (("full change", fulls), ("small change", smalls),
                                   ("repeat same frame", repeat)):
                    medians[(name, kind, w)] = sorted(vals)[len(vals) // 2]
            finally:
                srv.request("DELETE", "/v1/sandboxes/" + sid)
    for (name, kind, w), small in sorted(medians.items()):
        big = medians.get((name, kind, 1920))
        if w == 1280 and big is not None and small > 0:
            report("shot %s %s 1920x1080 / 1280x800" % (name, kind), [big / small], unit="x",
                   target="<= 2.25x")


def curl_ms(srv, sid, n):
    """Times of n requests for the screenshot as curl reports them, a new
    connection each; [] without curl."""
    if not shutil.which("curl"):
        return []
    url = "http://127.0.0.1:%d/v1/sandboxes/%s/desktop/screenshot" % (srv.port, sid)
    cmd = ["curl", "-s", "-H", "Authorization: Bearer " + srv.token, "-H", "Connection: close",
           "-w", "%{time_total}\\n"]
    for _ in range(n):
        cmd += ["-o", "/dev/null", url]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    return [float(x) * 1000 for x in out.split()]


def inner_import(srv, sid, n):
    script = ("for i in $(seq %d); do s=$(date +%%s%%N); import -window root /tmp/i.png "
              ">/dev/null 2>&1; e=$(date +%%s%%N); echo $(( (e-s)/1000 )); done" % n)
    res = srv.exec(sid, ["sh", "-c", script], timeout_s=300)
    return [int(x) / 1000.0 for x in res["stdout"].split()]
