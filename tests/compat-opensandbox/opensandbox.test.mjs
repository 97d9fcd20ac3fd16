// deskbox's OpenSandbox front-end driven by the official @alibaba-group/opensandbox SDK,
// unchanged: only `domain` (HOST:PORT/opensandbox) and the API key (deskbox's token)
// point it here.  Every call's effect is checked through deskbox's own API
// (DESKBOX_URL, DESKBOX_TOKEN).  Prints TAP.
import { ConnectionConfig, Sandbox, SandboxManager } from '@alibaba-group/opensandbox';

const base = process.env.DESKBOX_URL;
const token = process.env.DESKBOX_TOKEN;
let n = 0, failed = 0;
function ok(cond, name, detail) {
  n++;
  if (!cond) failed++;
  console.log(`${cond ? 'ok' : 'not ok'} ${n} - ${name}`);
  if (!cond && detail !== undefined) console.log('# ' + JSON.stringify(detail, (k, v) => typeof v === 'bigint' ? String(v) : v).slice(0, 600));
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

const connectionConfig = new ConnectionConfig({ domain: process.env.OSB_DOMAIN, apiKey: token, protocol: 'http' });
const t0 = performance.now();
const sbx = await Sandbox.create({
  connectionConfig, image: 'default', resource: { cpu: '500m', memory: '512Mi' },
  env: { GREETING: 'hi' }, metadata: { team: 'qa' }, timeoutSeconds: 600,
  networkPolicy: { defaultAction: 'deny', egress: [{ action: 'allow', target: 'pypi.org' }, { action: 'allow', target: '*.example.com' }] },
});
console.log(`# Sandbox.create took ${(performance.now() - t0).toFixed(0)} ms`);
let nat = await native('GET', `/v1/sandboxes/${sbx.id}`);
ok(nat.status === 200 && nat.json.status === 'running', 'create: deskbox has it running', nat.json);
ok(nat.json.cpu_millis === 500 && nat.json.memory_mb === 512, 'resources 500m / 512Mi are deskbox\'s limits', [nat.json.cpu_millis, nat.json.memory_mb]);
ok(nat.json.metadata?.team === 'qa', 'metadata', nat.json.metadata);
ok(nat.json.timeout_s > 590 && nat.json.timeout_s <= 600 && nat.json.on_timeout === 'delete', 'timeout: deleted when it expires', nat.json);
ok(JSON.stringify(nat.json.network) === JSON.stringify({ allow: ['pypi.org', '*.example.com'] }),
  'egress allow-list by domain and wildcard is deskbox\'s network allow list', nat.json.network);

const info = await sbx.getInfo();
ok(info.id === sbx.id && info.status.state === 'Running' && info.createdAt instanceof Date && info.expiresAt instanceof Date,
  'getInfo: Running, with createdAt and expiresAt', info);

// commands
let t1 = performance.now();
let ex = await sbx.commands.run('echo out; echo err >&2');
console.log(`# commands.run round trip ${(performance.now() - t1).toFixed(1)} ms`);
const text = (a) => a.map((m) => m.text).join('');
ok(ex.exitCode === 0 && text(ex.logs.stdout) === 'out\n' && text(ex.logs.stderr) === 'err\n', 'commands.run: stdout and stderr', ex);
ex = await sbx.commands.run('exit 5');
ok(ex.exitCode === 5, 'commands.run: a non-zero exit code', ex.exitCode);
ex = await sbx.commands.run('echo $GREETING $X; pwd; [[ 1 == 1 ]] && echo bash', { workingDirectory: '/tmp', envs: { X: 'y' } });
ok(text(ex.logs.stdout) === 'hi y\n/tmp\nbash\n', 'commands.run: env, cwd, and bash', text(ex.logs.stdout));
const seen = [];
ex = await sbx.commands.run('for i in 1 2 3; do echo $i; sleep 0.2; done', {}, { onStdout: (m) => seen.push([m.text, Date.now()]) });
ok(seen.length >= 2 && seen[seen.length - 1][1] - seen[0][1] >= 200, 'output streams as it is printed', seen);

// files
await sbx.files.writeFiles([{ path: '/workspace/osb/a.txt', data: 'hello osb', mode: 600 }]);
nat = await native('GET', `/v1/sandboxes/${sbx.id}/files/download?path=/workspace/osb/a.txt`);
ok(nat.status === 200 && nat.buf.toString() === 'hello osb', 'writeFiles: deskbox reads it back (parents made)', nat.buf.toString());
nat = await native('GET', `/v1/sandboxes/${sbx.id}/files/stat?path=/workspace/osb/a.txt`);
ok(nat.json?.mode === 0o600, 'writeFiles: mode 600 is octal 0600', nat.json);
const bin = new Uint8Array(200000).map((_, i) => (i * 13 + 1) & 0xff);
await sbx.files.writeFiles([{ path: '/workspace/bin.dat', data: bin }]);
nat = await native('GET', `/v1/sandboxes/${sbx.id}/files/download?path=/workspace/bin.dat`);
ok(Buffer.compare(nat.buf, Buffer.from(bin)) === 0, 'writeFiles: binary exact', nat.buf.length);
await native('PUT', `/v1/sandboxes/${sbx.id}/files/upload?path=/workspace/native.txt`, 'from deskbox');
ok(await sbx.files.readFile('/workspace/native.txt') === 'from deskbox', 'readFile: a file deskbox wrote');
const bytes = await sbx.files.readBytes('/workspace/bin.dat');
ok(Buffer.compare(Buffer.from(bytes), Buffer.from(bin)) === 0, 'readBytes: binary exact');
const fi = await sbx.files.getFileInfo(['/workspace/bin.dat', '/workspace/osb']);
ok(fi['/workspace/bin.dat']?.size === 200000 && fi['/workspace/bin.dat'].type === 'file' && fi['/workspace/osb']?.type === 'directory',
  'getFileInfo', fi);
await sbx.files.createDirectories([{ path: '/workspace/d1/d2', mode: 750 }]);
nat = await native('GET', `/v1/sandboxes/${sbx.id}/files/stat?path=/workspace/d1/d2`);
ok(nat.json?.type === 'dir' && nat.json.mode === 0o750, 'createDirectories with parents and mode 750', nat.json);
await sbx.files.writeFiles([{ path: '/workspace/b.txt', data: 'bee' }]);
await sbx.files.moveFiles([{ src: '/workspace/b.txt', dest: '/workspace/d1/b.txt' }]);
nat = await native('GET', `/v1/sandboxes/${sbx.id}/files/download?path=/workspace/d1/b.txt`);
ok(nat.status === 200 && nat.buf.toString() === 'bee', 'moveFiles', nat.status);
await sbx.files.deleteFiles(['/workspace/d1/b.txt']);
nat = await native('GET', `/v1/sandboxes/${sbx.id}/files/stat?path=/workspace/d1/b.txt`);
ok(nat.status === 404, 'deleteFiles', nat.status);
await sbx.files.deleteDirectories(['/workspace/d1']);
nat = await native('GET', `/v1/sandboxes/${sbx.id}/files/stat?path=/workspace/d1`);
ok(nat.status === 404, 'deleteDirectories (recursive)', nat.status);
let err = await sbx.files.readFile('/workspace/none').catch((e) => e);
ok(err instanceof Error && err.statusCode === 404, 'readFile of a missing file: 404', String(err));

// endpoints, lifecycle
const url = await sbx.getEndpointUrl(8080);
ok(url.endsWith(`/v1/sandboxes/${sbx.id}/ports/8080`), 'getEndpointUrl: deskbox\'s port proxy', url);
const mgr = SandboxManager.create({ connectionConfig });
let list = await mgr.listSandboxInfos({ metadata: { team: 'qa' } });
ok(list.items?.length === 1 && list.items[0].id === sbx.id && list.pagination?.totalItems === 1, 'list by metadata', list);
list = await mgr.listSandboxInfos({ states: ['Paused'] });
ok(list.items?.length === 0, 'list by state', list);
const newExp = await sbx.renew(3600);
nat = await native('GET', `/v1/sandboxes/${sbx.id}`);
ok(nat.json.timeout_s > 3590 && nat.json.timeout_s <= 3600 && newExp?.expiresAt, 'renew: an hour from now', [nat.json.timeout_s, newExp]);
await sbx.pause();
nat = await native('GET', `/v1/sandboxes/${sbx.id}`);
ok(nat.json.status === 'paused' && (await sbx.getInfo()).status.state === 'Paused', 'pause', nat.json.status);
const resumed = await sbx.resume();
nat = await native('GET', `/v1/sandboxes/${sbx.id}`);
ok(nat.json.status === 'running', 'resume', nat.json.status);
ex = await resumed.commands.run('cat /workspace/osb/a.txt');
ok(text(ex.logs.stdout) === 'hello osb', 'commands after resume', ex);
err = await Sandbox.create({ connectionConfig, image: 'python:3.12', readyTimeoutSeconds: 5 }).catch((e) => e);
ok(err instanceof Error, 'create from an image deskbox does not have fails', String(err));
err = await Sandbox.create({ connectionConfig, image: 'default', resource: { cpu: '1', memory: '1Gi', gpu: '1' } }).catch((e) => e);
ok(err instanceof Error && err.statusCode === 400, 'a GPU is refused', String(err));
await sbx.kill();
nat = await native('GET', `/v1/sandboxes/${sbx.id}`);
ok(nat.status === 404, 'kill: deskbox no longer has it', nat.status);
await connectionConfig.closeTransport?.();
await mgr.close();
console.log(`1..${n}`);
process.exit(failed ? 1 : 0);
