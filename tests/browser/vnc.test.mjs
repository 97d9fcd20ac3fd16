// The browser viewer in a real headless Chromium (the Debian package), driven
// by playwright-core.  Needs a running deskboxd: DESKBOX_URL
// (http://127.0.0.1:PORT) and DESKBOX_TOKEN (the API token); run by
// tests/integration/test_vnc_browser.py, which starts one.  Prints TAP.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inflateSync } from 'node:zlib';
import { chromium } from 'playwright-core';

const BASE = process.env.DESKBOX_URL;
const TOKEN = process.env.DESKBOX_TOKEN;
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
// The sandboxes' VNC server process (tests/lib/dbx.py VNC_PROC).
const VNC_PROC = process.env.DESKBOX_VNC === 'x11vnc' ? 'x11vnc' : 'deskbox-vnc';
const W = 1024, H = 640;

let n = 0, failed = 0;
function ok(cond, name, detail) {
  n++;
  if (!cond) failed++;
  console.log(`${cond ? 'ok' : 'not ok'} ${n} - ${name}`);
  if (!cond && detail !== undefined) console.log(`#   ${String(detail).split('\n').join('\n#   ')}`);
  return cond;
}
const diag = (m) => console.log(`# ${m}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function api(method, path, body) {
  const r = await fetch(BASE + path, {
    method,
    headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const buf = Buffer.from(await r.arrayBuffer());
  const type = r.headers.get('content-type') || '';
  return { status: r.status, body: type.includes('json') ? JSON.parse(buf.toString()) : buf };
}

async function exec(sid, argv, extra = {}) {
  const r = await api('POST', `/v1/sandboxes/${sid}/process/exec`, { argv, timeout_s: extra.background ? 3600 : 30, ...extra });
  if (r.status !== 200) throw new Error(`exec ${argv.join(' ')}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

async function pointer(sid) {
  const out = (await exec(sid, ['xdotool', 'getmouselocation'])).stdout;
  const m = /x:(\d+) y:(\d+)/.exec(out);
  return m ? [Number(m[1]), Number(m[2])] : null;
}

async function waitFor(fn, timeoutMs, stepMs = 100) {
  const end = Date.now() + timeoutMs;
  let v;
  while (Date.now() < end) {
    v = await fn();
    if (v) return v;
    await sleep(stepMs);
  }
  return v;
}

// An 8-bit RGB, RGBA or palette PNG into {w, h, px: RGB bytes}.
function decodePng(buf) {
  let pos = 8, w = 0, h = 0, ctype = 0, plte = null;
  const idat = [];
  while (pos < buf.length) {
    const len = buf.readUInt32BE(pos);
    const kind = buf.toString('latin1', pos + 4, pos + 8);
    const body = buf.subarray(pos + 8, pos + 8 + len);
    if (kind === 'IHDR') { w = body.readUInt32BE(0); h = body.readUInt32BE(4); ctype = body[9]; }
    if (kind === 'IDAT') idat.push(body);
    if (kind === 'PLTE') plte = body;
    pos += 12 + len;
  }
  const bpp = ctype === 6 ? 4 : ctype === 3 ? 1 : 3;
  const raw = inflateSync(Buffer.concat(idat));
  const stride = w * bpp;
  const out = Buffer.alloc(w * h * 3);
  let prev = Buffer.alloc(stride);
  for (let y = 0; y < h; y++) {
    const f = raw[y * (stride + 1)];
    const cur = Buffer.from(raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1)));
    for (let i = 0; i < stride; i++) {
      const a = i >= bpp ? cur[i - bpp] : 0, b = prev[i], c = i >= bpp ? prev[i - bpp] : 0;
      let add = 0;
      if (f === 1) add = a;
      else if (f === 2) add = b;
      else if (f === 3) add = (a + b) >> 1;
      else if (f === 4) {
        const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
        add = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      cur[i] = (cur[i] + add) & 255;
    }
    for (let x = 0; x < w; x++)
      for (let k = 0; k < 3; k++)
        out[(y * w + x) * 3 + k] = ctype === 3 ? plte[cur[x] * 3 + k] : cur[x * bpp + k];
    prev = cur;
  }
  return { w, h, px: out };
}

// RGB bytes of a region of the noVNC canvas (its backing store is the
// framebuffer at full size, whatever the CSS scaling).
async function canvasRegion(page, x, y, w, h) {
  const arr = await page.evaluate(([x, y, w, h]) => {
    const c = document.querySelector('#screen canvas');
    if (!c || c.width === 0) return null;
    const d = c.getContext('2d').getImageData(x, y, w, h).data;
    const out = new Array(w * h * 3);
    for (let i = 0, j = 0; i < d.length; i += 4) { out[j++] = d[i]; out[j++] = d[i + 1]; out[j++] = d[i + 2]; }
    return out;
  }, [x, y, w, h]);
  return arr && Buffer.from(arr);
}

const near = (a, b, tol = 8) => Math.abs(a - b) <= tol;
async function canvasShows(page, x, y, rgb) {
  const p = await canvasRegion(page, x, y, 1, 1);
  return p && near(p[0], rgb[0]) && near(p[1], rgb[1]) && near(p[2], rgb[2]);
}

// Page coordinates of desktop pixel (x, y) in the scaled canvas.
async function toPage(page, x, y) {
  return page.evaluate(([x, y]) => {
    const c = document.querySelector('#screen canvas');
    const r = c.getBoundingClientRect();
    return [r.left + (x + 0.5) * r.width / c.width, r.top + (y + 0.5) * r.height / c.height];
  }, [x, y]);
}

async function newToken(sid, viewOnly, ttl = 600) {
  const r = await api('POST', `/v1/sandboxes/${sid}/vnc/tokens`, { view_only: viewOnly, ttl_s: ttl });
  if (r.status !== 201) throw new Error(`token: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

async function main() {
  const userData = mkdtempSync(join(tmpdir(), 'dbx-chromium-'));
  const ctx = await chromium.launchPersistentContext(userData, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1100, height: 740 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-quic', '--no-first-run', '--disable-component-update', '--disable-sync'],
  });
  const sids = [];
  try {
    let r = await api('POST', '/v1/sandboxes', { display: { width: W, height: H } });
    ok(r.status === 201, 'sandbox created', JSON.stringify(r.body));
    const sid = r.body.id;
    sids.push(sid);
    r = await api('POST', '/v1/sandboxes', { display: { width: 640, height: 480 } });
    const other = r.body.id;
    sids.push(other);

    // An orange root window with a blue grid: content to compare, and a
    // color to recognise the first frame by.
    await exec(sid, ['xsetroot', '-mod', '16', '16', '-fg', '#0000ff', '-bg', '#ff8800']);

    // --- An interactive viewer: the page shows the desktop. ---
    const inter = await newToken(sid, false);
    const page = await ctx.newPage();
    const resp = await page.goto(BASE + inter.url);
    ok(resp.status() === 200, 'page loads with a viewer token');
    const firstFrameMs = await page.waitForFunction(() => {
      const c = document.querySelector('#screen canvas');
      if (!c || c.width < 10) return false;
      const d = c.getContext('2d').getImageData(2, 2, 1, 1).data;
      return Math.abs(d[0] - 255) < 8 && Math.abs(d[1] - 136) < 8 && d[2] < 8 ? performance.now() : false;
    }, null, { polling: 'raf', timeout: 20000 }).then((h) => h.jsonValue()).catch(() => null);
    ok(firstFrameMs !== null, 'the canvas shows the desktop (root window color)');
    diag(`page load to first desktop frame: ${firstFrameMs === null ? '-' : firstFrameMs.toFixed(0)} ms (navigation start to canvas pixel)`);
    const marks = await page.evaluate(() => [performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd, window.deskbox.wsAt, window.deskbox.connectedAt]);
    const res = await page.evaluate(() => { const n = performance.getEntriesByType('navigation')[0]; const r = performance.getEntriesByType('resource'); return [n.responseEnd, r.length, Math.min(...r.map((e) => e.startTime)), Math.max(...r.map((e) => e.responseEnd))]; });
    diag(`  page HTML in at ${res[0].toFixed(0)} ms; ${res[1]} files (noVNC modules) fetched from ${res[2].toFixed(0)} to ${res[3].toFixed(0)} ms`);
    diag(`  of which: DOMContentLoaded ${marks[0].toFixed(0)} ms, WebSocket opened at ${marks[1].toFixed(0)} ms (after loading noVNC's modules), RFB connected at ${marks[2].toFixed(0)} ms`);
    const badgeHidden = await page.evaluate(() => document.getElementById('badge').hidden);
    ok(badgeHidden, 'no view-only badge on an interactive viewer');
    const size = await page.evaluate(() => { const c = document.querySelector('#screen canvas'); const r = c.getBoundingClientRect(); return [c.width, c.height, r.width, r.height]; });
    ok(size[0] === W && size[1] === H, `canvas holds the full framebuffer (${size[0]}x${size[1]})`);
    ok(size[2] <= 1100 && size[3] <= 740 - 24 + 1 && (Math.abs(size[2] - 1100) < 2 || Math.abs(size[3] - 716) < 2),
      `canvas scaled to the window (${size[2].toFixed(0)}x${size[3].toFixed(0)})`);

    // Region of the canvas against the REST screenshot, pixel for pixel.
    // noVNC asks for Tight with JPEG (quality 6), so text edges come out
    // slightly lossy: compare with a tolerance, and the mean difference.
    // The canvas may still be catching up: compared again until it matches
    // or 5 s pass.
    let rest, same = 0, mean = 255;
    await waitFor(async () => {
      rest = decodePng((await api('GET', `/v1/sandboxes/${sid}/desktop/screenshot?x=0&y=0&w=300&h=300`)).body);
      const canv = await canvasRegion(page, 0, 0, 300, 300);
      let sum = 0;
      same = 0;
      for (let i = 0; i < 300 * 300 * 3; i++) sum += Math.abs(rest.px[i] - canv[i]);
      for (let i = 0; i < 300 * 300; i++)
        if (near(rest.px[3 * i], canv[3 * i], 48) && near(rest.px[3 * i + 1], canv[3 * i + 1], 48) && near(rest.px[3 * i + 2], canv[3 * i + 2], 48)) same++;
      mean = sum / (300 * 300 * 3);
      return same >= 300 * 300 * 0.99 && mean < 4;
    }, 5000);
    ok(same >= 300 * 300 * 0.99 && mean < 4, `canvas region matches the REST screenshot (${(100 * same / 90000).toFixed(2)}% of pixels within 48, mean difference ${mean.toFixed(2)})`);
    const distinct = new Set();
    for (let i = 0; i < 300 * 300; i += 7) distinct.add(rest.px.readUIntBE(3 * i, 3));
    ok(distinct.size >= 2, 'the compared region has content (the grid on the root window)',
      `colors: ${[...distinct].slice(0, 5).map((c) => c.toString(16)).join(' ')}`);

    // A click in the canvas reaches the desktop.
    await api('POST', `/v1/sandboxes/${sid}/desktop/move`, { x: 5, y: 5 });
    const [px, py] = await toPage(page, 400, 300);
    await page.mouse.click(px, py);
    const moved = await waitFor(async () => { const p = await pointer(sid); return p && near(p[0], 400, 1) && near(p[1], 300, 1) ? p : null; }, 5000);
    ok(moved, 'an interactive click in the canvas moved the desktop pointer there', JSON.stringify(await pointer(sid)));

    // Keys reach the desktop: type into an xterm.
    await exec(sid, ['rm', '-f', '/tmp/kb.txt']);
    await exec(sid, ['xterm', '-T', 'kbterm', '-geometry', '40x6+500+300', '-e', 'sh', '-c', 'cat > /tmp/kb.txt'], { background: true });
    await waitFor(async () => (await exec(sid, ['sh', '-c', 'xdotool search --name kbterm'])).stdout.trim(), 10000);
    // Pacing, not waiting on a condition: the new window settles (openbox
    // maps and focuses it), and the click's focus lands before the keys.
    await sleep(500);
    const [kx, ky] = await toPage(page, 600, 340);
    await page.mouse.click(kx, ky);
    await sleep(200);
    await page.keyboard.type('hello');
    await page.keyboard.press('Enter');
    const typed = await waitFor(async () => { const o = (await exec(sid, ['cat', '/tmp/kb.txt'])).stdout; return o.includes('hello') ? o : null; }, 5000);
    ok(typed === 'hello\n', 'interactive keys reached the xterm', JSON.stringify(typed));

    // --- A view-only viewer: badge, and nothing reaches the desktop. ---
    const vo = await newToken(sid, true);
    const vpage = await ctx.newPage();
    await vpage.goto(BASE + vo.url);
    const voShown = await vpage.waitForFunction(() => window.deskbox && window.deskbox.connected, null, { timeout: 15000 }).then(() => true).catch(() => false);
    ok(voShown, 'view-only viewer connects');
    ok(await waitFor(() => canvasShows(vpage, 2, 2, [255, 136, 0]), 10000, 10), 'view-only viewer shows the desktop');
    diag(`second page (noVNC's modules cached): first desktop frame ${(await vpage.evaluate(() => performance.now())).toFixed(0)} ms after navigation start (upper bound)`);
    const badge = await vpage.evaluate(() => { const b = document.getElementById('badge'); return !b.hidden && b.getBoundingClientRect().width > 0 ? b.textContent : null; });
    ok(badge === 'VIEW ONLY', 'view-only badge is visible');
    await api('POST', `/v1/sandboxes/${sid}/desktop/move`, { x: 5, y: 5 });
    // noVNC itself ignores input when viewOnly; turn that off so the events
    // are really sent and the server has to drop them.
    await vpage.evaluate(() => { window.deskbox.rfb.viewOnly = false; window.deskbox.rfb.focus(); });
    const [vx, vy] = await toPage(vpage, 600, 340);
    await vpage.mouse.move(vx - 50, vy - 20);
    await vpage.mouse.click(vx, vy);
    await vpage.keyboard.type('evil');
    await vpage.keyboard.press('Enter');
    // A check that something did not happen: no condition to wait for, so
    // wrongly forwarded input is given 1 s to land.
    await sleep(1000);
    const still = await pointer(sid);
    ok(still && still[0] === 5 && still[1] === 5, 'view-only clicks never reached the desktop', JSON.stringify(still));
    const kb = (await exec(sid, ['cat', '/tmp/kb.txt'])).stdout;
    ok(kb === 'hello\n', 'view-only keys never reached the desktop', JSON.stringify(kb));
    const voState = await vpage.evaluate(() => window.deskbox.connected);
    ok(voState === true, 'the view-only viewer stays connected while its input is dropped');
    await vpage.close();

    // --- Refusals, seen by the browser. ---
    const pageUrl = `/v1/sandboxes/${sid}/vnc/`;
    const otherTok = await newToken(other, false);
    const revoked = await newToken(sid, false);
    await api('DELETE', `/v1/sandboxes/${sid}/vnc/tokens/${revoked.token}`);
    const expired = await newToken(sid, false, 1);
    // Expiry counts whole seconds: wait until the page refuses the token.
    await waitFor(async () => (await fetch(`${BASE}${pageUrl}?token=${expired.token}`)).status === 401, 5000);
    const rp = await ctx.newPage();
    for (const [name, q] of [['no token', ''], ['a wrong token', '?token=' + 'ab'.repeat(32)],
      ["another sandbox's token", '?token=' + otherTok.token], ['a revoked token', '?token=' + revoked.token],
      ['an expired token', '?token=' + expired.token]]) {
      const res = await rp.goto(BASE + pageUrl + q);
      ok(res.status() === 401, `page with ${name}: ${res.status()}`);
    }
    // WebSockets from the browser: the same origin with a good token gets
    // RFB; a bad token or a foreign Origin gets nothing.
    await rp.goto(BASE + inter.url);
    const wsTry = (url) => rp.evaluate((url) => new Promise((resolve) => {
      const ws = new WebSocket(url, ['binary']);
      ws.binaryType = 'arraybuffer';
      let opened = false, bytes = '';
      ws.onopen = () => { opened = true; };
      ws.onmessage = (ev) => { bytes += String.fromCharCode(...new Uint8Array(ev.data)); ws.close(); };
      ws.onclose = () => resolve({ opened, bytes });
      setTimeout(() => { try { ws.close(); } catch (e) { /* closed */ } resolve({ opened, bytes }); }, 5000);
    }), url);
    const port = new URL(BASE).port;
    const wsPath = `/v1/sandboxes/${sid}/vnc/websockify?token=`;
    let w = await wsTry(`ws://127.0.0.1:${port}${wsPath}${inter.token}`);
    ok(w.opened && w.bytes.startsWith('RFB 003.'), 'same-origin WebSocket with a valid token gets the RFB banner', JSON.stringify(w));
    for (const [name, tok] of [['wrong', 'cd'.repeat(32)], ['revoked', revoked.token], ['expired', expired.token], ["another sandbox's", otherTok.token]]) {
      w = await wsTry(`ws://127.0.0.1:${port}${wsPath}${tok}`);
      ok(!w.opened && w.bytes === '', `WebSocket with a ${name} token refused, no RFB byte`, JSON.stringify(w));
    }
    // localhost and 127.0.0.1 are different origins: the page's Origin
    // (http://127.0.0.1:PORT) does not match Host localhost:PORT.
    w = await wsTry(`ws://localhost:${port}${wsPath}${inter.token}`);
    ok(!w.opened && w.bytes === '', 'cross-origin WebSocket refused, no RFB byte', JSON.stringify(w));
    await rp.close();

    // --- Resilience: kill x11vnc; init restarts it; the page reconnects. ---
    const xvfb = (await exec(sid, ['pgrep', '-x', 'Xvfb'])).stdout.trim();
    const before = await page.evaluate(() => window.deskbox.connects);
    const t0 = Date.now();
    const vncBefore = (await exec(sid, ['pgrep', '-x', VNC_PROC])).stdout.trim();
    // The VNC server is the sandbox root's, out of its user's reach: killed
    // from the host (tests/lib/dbx.py kill).
    const killed = spawnSync('python3', [process.env.DESKBOX_DBX, 'kill', process.env.DESKBOX_STATE, sid, VNC_PROC]);
    ok(killed.status === 0, `x11vnc (pid ${vncBefore}) killed inside the sandbox`);
    const back = await waitFor(() => page.evaluate((b) => window.deskbox.connects > b && window.deskbox.connected, before), 30000);
    ok(back, 'viewer reconnected after x11vnc was killed',
      `x11vnc now: ${(await exec(sid, ['pgrep', '-a', VNC_PROC])).stdout.trim()}; page: ${await page.evaluate(() => JSON.stringify({ c: window.deskbox.connects, ok: window.deskbox.connected, s: document.getElementById('status').textContent }))}`);
    diag(`viewer back ${Date.now() - t0} ms after pkill x11vnc (${await page.evaluate(() => window.deskbox.connects)} connects)`);
    await exec(sid, ['xsetroot', '-solid', '#0088ff']);
    ok(await waitFor(() => canvasShows(page, 2, 2, [0, 136, 255]), 10000), 'the reconnected viewer shows the desktop live (root repainted)');
    ok((await exec(sid, ['pgrep', '-x', 'Xvfb'])).stdout.trim() === xvfb, 'same desktop: Xvfb was not restarted');
    const xterm = (await exec(sid, ['sh', '-c', 'xdotool search --name kbterm | head -1'])).stdout.trim();
    ok(xterm !== '', 'same desktop: the xterm window is still there');

    // Revoking the token ends the page's access for good.
    await api('DELETE', `/v1/sandboxes/${sid}/vnc/tokens/${inter.token}`);
    const ended = await waitFor(() => page.evaluate(() => window.deskbox.ended), 15000);
    ok(ended, 'revoking the token disconnects the viewer and the page stops reconnecting');
  } catch (err) {
    ok(false, 'browser test crashed', err && err.stack);
  } finally {
    await ctx.close().catch(() => {});
    rmSync(userData, { recursive: true, force: true });
    for (const s of sids) await api('DELETE', `/v1/sandboxes/${s}`).catch(() => {});
  }
  console.log(`1..${n}`);
  process.exit(failed ? 1 : 0);
}

main();
