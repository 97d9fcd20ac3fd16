// The terminal page (xterm.js) in a real headless Chromium (the Debian
// package), driven by playwright-core.  Needs a running deskboxd:
// DESKBOX_URL and DESKBOX_TOKEN; run by
// tests/integration/test_terminal_browser.py, which starts one.  Prints TAP.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const BASE = process.env.DESKBOX_URL;
const TOKEN = process.env.DESKBOX_TOKEN;
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

let n = 0, failed = 0;
function ok(cond, name, detail) {
  n++;
  if (!cond) failed++;
  console.log(`${cond ? 'ok' : 'not ok'} ${n} - ${name}`);
  if (!cond && detail !== undefined) console.log(`#   ${String(detail).split('\n').join('\n#   ')}`);
  return cond;
}

async function api(method, path, body) {
  const r = await fetch(BASE + path, {
    method,
    headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, body: json ?? text };
}

// The terminal's screen as text, from xterm.js's own buffer.
function screen(page) {
  return page.evaluate(() => {
    const b = window.deskboxTerm.buffer.active;
    const lines = [];
    for (let i = 0; i < b.length; i++) lines.push(b.getLine(i).translateToString(true));
    return lines.join('\n');
  });
}

async function waitScreen(page, re, timeoutMs = 30000) {
  const end = Date.now() + timeoutMs;
  let s = '';
  while (Date.now() < end) {
    s = await screen(page);
    if (re.test(s)) return s;
    await new Promise((r) => setTimeout(r, 100));
  }
  return null;
}

async function main() {
  const userData = mkdtempSync(join(tmpdir(), 'dbx-chromium-'));
  const ctx = await chromium.launchPersistentContext(userData, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1000, height: 600 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-quic', '--no-first-run', '--disable-component-update', '--disable-sync'],
  });
  let sid = null;
  try {
    let r = await api('POST', '/v1/sandboxes', {});
    ok(r.status === 201, 'sandbox created', JSON.stringify(r.body));
    sid = r.body.id;
    const T = `/v1/sandboxes/${sid}/terminals`;
    r = await api('POST', T, { cols: 80, rows: 24 });
    ok(r.status === 201, 'terminal created', JSON.stringify(r.body));
    const tid = r.body.id;
    r = await api('POST', `${T}/${tid}/tokens`, { ttl_s: 600 });
    ok(r.status === 201, 'terminal token created', JSON.stringify(r.body));
    const url = r.body.url;

    const page = await ctx.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    const resp = await page.goto(BASE + url);
    ok(resp.status() === 200, 'the page loads with the terminal token');
    ok(await page.waitForFunction(() => window.deskboxTerm &&
      document.getElementById('status').textContent.startsWith('connected'), null,
    { timeout: 30000 }).then(() => true, () => false), 'xterm.js connects to the terminal');
    ok(await waitScreen(page, /\$ $/m), 'the shell prompt shows', await screen(page));

    // The page takes the keyboard on load: typing reaches the shell with
    // no click first; its answer shows in xterm.
    ok(await page.evaluate(() => document.activeElement &&
      document.getElementById('term').contains(document.activeElement)),
    'the terminal has the keyboard focus on load',
    await page.evaluate(() => document.activeElement && document.activeElement.tagName));
    await page.keyboard.type('echo hi');
    await page.keyboard.press('Enter');
    const s = await waitScreen(page, /^hi$/m);
    ok(s !== null, 'typing `echo hi` shows `hi` in the terminal', await screen(page));

    // The page fitted the terminal to the window: the tty has xterm's size.
    const size = await page.evaluate(() => [window.deskboxTerm.rows, window.deskboxTerm.cols]);
    await page.keyboard.type('stty size');
    await page.keyboard.press('Enter');
    ok(await waitScreen(page, new RegExp(`^${size[0]} ${size[1]}$`, 'm')) !== null,
      `stty size matches the fitted page (${size[0]} ${size[1]})`, await screen(page));
    const info = await api('GET', `${T}/${tid}`);
    ok(info.body.cols === size[1] && info.body.rows === size[0], 'the terminal record has the page size',
      JSON.stringify(info.body));

    // A reload reconnects and the replay rebuilds the screen.
    await page.reload();
    ok(await waitScreen(page, /^hi$/m) !== null, 'after a reload the replay shows the earlier output',
      await screen(page));

    // A view-only token shows the output but types nothing.
    r = await api('POST', `${T}/${tid}/tokens`, { view_only: true });
    const vpage = await ctx.newPage();
    await vpage.goto(BASE + r.body.url);
    ok(await waitScreen(vpage, /^hi$/m) !== null, 'a view-only page shows the terminal');
    await vpage.click('#term');
    await vpage.keyboard.type('echo viewonly-$((2+3))');
    await vpage.keyboard.press('Enter');
    await page.bringToFront();
    await page.click('#term');
    await page.keyboard.type('echo inter-$((3+4))');
    await page.keyboard.press('Enter');
    ok(await waitScreen(vpage, /^inter-7$/m) !== null, 'the view-only page sees the output live');
    ok(!/viewonly-5/.test(await screen(page)), 'what the view-only page typed never reached the shell');

    // The shell exits: the page says so.
    await page.keyboard.type('exit 4');
    await page.keyboard.press('Enter');
    ok(await page.waitForFunction(() => /exit code 4/.test(document.getElementById('status').textContent),
      null, { timeout: 30000 }).then(() => true, () => false), 'the page shows the exit code');
    ok(errors.length === 0, 'no script errors on the page', errors.join('\n'));
  } catch (err) {
    ok(false, 'browser test crashed', err && err.stack);
  } finally {
    await ctx.close().catch(() => {});
    rmSync(userData, { recursive: true, force: true });
    if (sid) await api('DELETE', `/v1/sandboxes/${sid}`).catch(() => {});
  }
  console.log(`1..${n}`);
  process.exit(failed ? 1 : 0);
}

main();
