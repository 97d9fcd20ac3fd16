// What the per-engine bench scripts share: the engine's official SDK loaded
// from its pinned project (tests/compat-<engine>, the working directory),
// deskbox's native API, and the timing loop.  Everything is timed inside
// this one node process, so node's start-up is never counted.  Prints one
// JSON line: {"create": {"sdk": [ms...], "native": [...]}, "command": {...}}.
// DESKBOX_URL, DESKBOX_TOKEN; N creates (default 5), M commands (default 30).
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

export const base = process.env.DESKBOX_URL;
export const token = process.env.DESKBOX_TOKEN;
const N = Number(process.env.N || 5), M = Number(process.env.M || 30);

export async function sdk(name) {
  const req = createRequire(process.cwd() + '/package.json');
  return import(pathToFileURL(req.resolve(name)).href);
}

export async function native(method, path, body, headers = {}) {
  const r = await fetch(base + path, {
    method, headers: { Authorization: 'Bearer ' + token, 'Content-Type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  if (r.status >= 400) throw new Error(`${method} ${path}: ${r.status} ${text.slice(0, 200)}`);
  return text ? JSON.parse(text) : null;
}

export const nativeExec = (id, argv) => native('POST', `/v1/sandboxes/${id}/process/exec`, { argv });

// The warm pool refilled (its ready desktops back), so that each create
// meets the same pool: a claim when the spec matches it.
async function poolReady(want) {
  const deadline = Date.now() + 30000;
  while (Date.now() < deadline) {
    const r = await fetch(base + '/metrics');
    const m = /^deskbox_warm_pool_ready (\d+)$/m.exec(await r.text());
    if (!m || Number(m[1]) >= want) return new Promise((res) => setTimeout(res, 300));
    await new Promise((res) => setTimeout(res, 100));
  }
}

async function timed(fn) {
  const t0 = performance.now();
  const v = await fn();
  return [performance.now() - t0, v];
}

// e = {create(i) -> handle, remove(handle), command(handle),
//      nativeCreate(i) -> id, nativeCommand(id), raw(handle)?}
// `raw`, when given, is the same command sent to the front-end by hand
// (no SDK): what of the added time is the SDK's own, in the client.
// `create` is null for an engine with no create of its own (its one call
// makes a fresh sandbox each time): then only the command figures are
// taken, each after the warm pool has refilled.
export async function bench(e) {
  const out = { create: { sdk: [], native: [] }, command: { sdk: [], native: [], raw: [] } };
  const pool = Number(process.env.WARM_POOL || 0);
  let h = null, id = null;
  for (let i = 0; i < N && e.create; i++) {
    await poolReady(pool);
    const [a, hh] = await timed(() => e.create(i));
    out.create.sdk.push(a);
    await poolReady(pool);
    const [b, ii] = await timed(() => e.nativeCreate(i));
    out.create.native.push(b);
    if (i < N - 1) {
      await e.remove(hh);
      await native('DELETE', '/v1/sandboxes/' + ii);
    } else {
      h = hh; id = ii;
    }
  }
  // One of each first (connections opened, the sandbox's first process),
  // then alternating, so that drift on a shared machine hits both alike.
  if (e.create) { await e.command(h); await e.nativeCommand(id); if (e.raw) await e.raw(h); }
  for (let j = 0; j < M; j++) {
    if (!e.create) await poolReady(pool);
    out.command.sdk.push((await timed(() => e.command(h)))[0]);
    if (!e.create) await poolReady(pool);
    out.command.native.push((await timed(() => e.nativeCommand(id)))[0]);
    if (e.raw) out.command.raw.push((await timed(() => e.raw(h)))[0]);
  }
  if (e.create) {
    await e.remove(h);
    await native('DELETE', '/v1/sandboxes/' + id);
  }
  console.log(JSON.stringify(out));
}
