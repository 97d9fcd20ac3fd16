// deskbox's Sprites front-end driven by the official @fly/sprites SDK, unchanged: only
// baseURL (http://HOST:PORT/sprites) and the token (deskbox's) point it here.  Every
// call's effect is checked through deskbox's own API (DESKBOX_URL, DESKBOX_TOKEN).
// Node 20 needs --experimental-websocket (the SDK wants Node 24's WebSocket).  TAP.
import { SpritesClient } from '@fly/sprites';

const base = process.env.DESKBOX_URL;
const token = process.env.DESKBOX_TOKEN;
let n = 0, failed = 0;
function ok(cond, name, detail) {
  n++;
  if (!cond) failed++;
  console.log(`${cond ? 'ok' : 'not ok'} ${n} - ${name}`);
  if (!cond && detail !== undefined) console.log('# ' + JSON.stringify(detail).slice(0, 600));
}
async function native(method, path, body) {
  const r = await fetch(base + path, {
    method, headers: { Authorization: 'Bearer ' + token },
    body: body === undefined || typeof body === 'string' ? body : JSON.stringify(body),
  });
  const buf = Buffer.from(await r.arrayBuffer());
  let json = null;
  try { json = JSON.parse(buf.toString()); } catch { }
  return { status: r.status, buf, json };
}

const client = new SpritesClient(token, { baseURL: process.env.SPRITES_BASE_URL });
const t0 = performance.now();
const sprite = await client.createSprite('sp-one', { ramMB: 512, cpus: 1 });
console.log(`# createSprite took ${(performance.now() - t0).toFixed(0)} ms`);
let nat = await native('GET', '/v1/sandboxes/sp-one');
ok(nat.status === 200 && nat.json.name === 'sp-one' && nat.json.status === 'running' && nat.json.memory_mb === 512,
  'createSprite: a running sandbox named after it, with its memory', nat.json);
const info = await client.getSprite('sp-one');
ok(info.name === 'sp-one' && info.status === 'running' && /\/ports\/8080\/$/.test(info.url), 'getSprite: status and url', info);

let t1 = performance.now();
let r = await sprite.execFile('sh', ['-c', 'echo out; echo err >&2']);
console.log(`# execFile round trip ${(performance.now() - t1).toFixed(1)} ms`);
ok(r.exitCode === 0 && r.stdout === 'out\n' && r.stderr === 'err\n', 'execFile: stdout and stderr apart', r);
r = await sprite.execFile('sh', ['-c', 'exit 7']).catch((e) => e);
ok(r.name === 'ExecError' && r.exitCode === 7, 'execFile: a non-zero exit is an ExecError with its code', String(r));
r = await sprite.exec('pwd', { cwd: '/tmp', env: { A: 'b' } });
ok(r.stdout === '/tmp\n', 'exec with cwd', r);
r = await sprite.execFile('sh', ['-c', 'echo "$A $B"'], { env: { A: 'x y', B: 'z' } });
ok(r.stdout === 'x y z\n', 'env values with spaces arrive whole', r);
r = await sprite.execFile('sh', ['-c', 'echo "hello > $HOME" > /workspace/f.txt']);
nat = await native('GET', '/v1/sandboxes/sp-one/files/download?path=/workspace/f.txt');
ok(nat.status === 200 && /^hello > \//.test(nat.buf.toString()), 'a file written by exec is read back through deskbox', nat.buf.toString());

const cat = sprite.spawn('cat', []);
let catOut = '';
cat.stdout.on('data', (c) => { catOut += c.toString(); });
const catExit = new Promise((res) => cat.on('exit', res));
await new Promise((res, rej) => { cat.on('spawn', res); cat.on('error', rej); });
cat.stdin.write('line one\n');
cat.stdin.write('line two\n');
cat.stdin.end();
const catCode = await catExit;
ok(catCode === 0 && catOut === 'line one\nline two\n', 'spawn: stdin streamed, EOF ends cat', [catCode, catOut]);

if (process.env.SPRITES_SLOW === '1') {
  t1 = performance.now();
  r = await sprite.execFile('sh', ['-c', 'sleep 50; echo done']);
  ok(r.stdout === 'done\n', `a command quiet for 50 s survives the SDK's 45 s idle timer (${((performance.now() - t1) / 1000).toFixed(1)} s)`, r);
}

// checkpoints
await sprite.execFile('sh', ['-c', 'echo before > /workspace/state.txt']);
let stream = await sprite.createCheckpoint('deps-installed');
await stream.processAll(() => {});
await sprite.execFile('sh', ['-c', 'echo after > /workspace/state.txt; touch /workspace/new.txt']);
stream = await sprite.createCheckpoint('second');
await stream.processAll(() => {});
const cps = await sprite.listCheckpoints();
const dep = cps.find((c) => c.comment === 'deps-installed');
ok(cps.length === 2 && dep && dep.createTime instanceof Date && !isNaN(dep.createTime), 'listCheckpoints: both, with comments', cps);
nat = await native('GET', '/v1/sandboxes/sp-one/checkpoints');
ok(nat.status === 200 && nat.json.checkpoints?.length === 2, 'deskbox lists the two checkpoints', nat.json);
const one = await sprite.getCheckpoint(dep.id);
ok(one.id === dep.id && one.comment === 'deps-installed', 'getCheckpoint', one);
r = await sprite.getCheckpoint('v99').catch((e) => e);
ok(r instanceof Error && /not found/i.test(r.message), 'getCheckpoint of an unknown id', String(r));
stream = await sprite.restoreCheckpoint(dep.id);
await stream.processAll(() => {});
r = await sprite.execFile('sh', ['-c', 'cat /workspace/state.txt; ls /workspace']);
ok(r.stdout === 'before\nf.txt\nstate.txt\n', 'restore of "deps-installed" brings the old file back, the later one gone', r);
nat = await native('GET', '/v1/sandboxes/sp-one/files/download?path=/workspace/state.txt');
ok(nat.buf.toString() === 'before\n', 'deskbox reads the restored file', nat.buf.toString());

await sprite.updateNetworkPolicy({ rules: [{ domain: 'pypi.org', action: 'allow' }, { domain: '*.example.com', action: 'allow' }] });
nat = await native('GET', '/v1/sandboxes/sp-one');
ok(JSON.stringify(nat.json.network) === JSON.stringify({ allow: ['pypi.org', '*.example.com'] }),
  'updateNetworkPolicy: the domains are deskbox\'s network allow list', nat.json.network);
const pol = await sprite.getNetworkPolicy();
ok(pol.rules?.length === 2 && pol.rules[1].domain === '*.example.com' && pol.rules[1].action === 'allow', 'getNetworkPolicy', pol);
r = await sprite.updateNetworkPolicy({ rules: [{ domain: 'evil.com', action: 'deny' }] }).catch((e) => e);
ok(r instanceof Error && /Invalid policy/.test(r.message), 'a deny rule is refused as invalid', String(r));
await sprite.updateNetworkPolicy({ rules: [] });
nat = await native('GET', '/v1/sandboxes/sp-one');
ok(nat.json.network === 'none', 'no rules: no network', nat.json.network);

const list = await client.listSprites();
ok(list.sprites.some((s) => s.name === 'sp-one'), 'listSprites', list.sprites.map((s) => s.name));
r = await client.getSprite('no-such').catch((e) => e);
ok(r instanceof Error, 'getSprite of an unknown sprite fails', String(r));
r = await client.createSprite('Bad_Name').catch((e) => e);
ok(r instanceof Error, 'createSprite with a name deskbox cannot take fails', String(r));

await sprite.delete();
nat = await native('GET', '/v1/sandboxes/sp-one');
ok(nat.status === 404, 'delete: deskbox no longer has it', nat.status);
console.log(`1..${n}`);
process.exit(failed ? 1 : 0);
