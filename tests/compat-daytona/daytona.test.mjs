// deskbox's Daytona front-end driven by the official @daytonaio/sdk, unchanged:
// only DAYTONA_API_URL (http://HOST:PORT/daytona/api) and DAYTONA_API_KEY (deskbox's
// token) point it here.  Every call's effect is checked through deskbox's own API
// (DESKBOX_URL, DESKBOX_TOKEN).  Prints TAP.
import { Daytona, DaytonaNotFoundError, DaytonaValidationError } from '@daytonaio/sdk';

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
    method, headers: { Authorization: 'Bearer ' + token, 'Content-Type': 'application/json' },
    body: body === undefined || typeof body === 'string' ? body : JSON.stringify(body),
  });
  const buf = Buffer.from(await r.arrayBuffer());
  let json = null;
  try { json = JSON.parse(buf.toString()); } catch { }
  return { status: r.status, buf, json };
}
async function rejects(p, cls, name) {
  try { await p; ok(false, name, 'resolved'); } catch (e) {
    ok(e instanceof cls, name, { cls: e.constructor.name, msg: e.message });
    return e;
  }
}

const daytona = new Daytona();
const t0 = performance.now();
const sb = await daytona.create({ language: 'python', labels: { team: 'qa' }, envVars: { GREETING: 'hi' },
  autoStopInterval: 0 });
const createMs = performance.now() - t0;
console.log(`# create took ${createMs.toFixed(0)} ms`);
ok(typeof sb.id === 'string' && sb.id.length > 0 && sb.state === 'started', 'create: a started sandbox', sb.state);
let nat = await native('GET', `/v1/sandboxes/${sb.id}`);
ok(nat.status === 200 && nat.json.status === 'running', 'create: deskbox lists it running', nat.json);
ok(nat.json.metadata?.team === 'qa' && nat.json.metadata?.['code-toolbox-language'] === 'python',
  'create: labels are the sandbox\'s metadata, the language label included', nat.json.metadata);
nat = await native('POST', `/v1/sandboxes/${sb.id}/process/exec`, { command: 'echo $GREETING' });
ok(nat.json?.stdout === 'hi\n', 'create: envVars are its environment (deskbox\'s exec sees them)', nat.json);
ok(sb.labels?.['code-toolbox-language'] === 'python', 'the language label is echoed', sb.labels);

// process
let t1 = performance.now();
let r = await sb.process.executeCommand('echo hello && echo err >&2; exit 3');
console.log(`# executeCommand took ${(performance.now() - t1).toFixed(1)} ms`);
ok(r.exitCode === 3 && r.result === 'hello\nerr\n', 'executeCommand: exit code and stdout+stderr', r);
r = await sb.process.executeCommand('pwd; echo $A $GREETING', '/tmp', { A: 'b' });
ok(r.exitCode === 0 && r.result === '/tmp\nb hi\n', 'executeCommand: cwd and env', r);
r = await sb.process.codeRun('import sys\nprint("Hello from Daytona!")\nprint(sys.argv[1:])',
  { argv: ['x', 'y'] });
ok(r.exitCode === 0 && r.result === "Hello from Daytona!\n['x', 'y']\n", 'codeRun: python with argv', r);
r = await sb.process.codeRun('raise SystemExit(4)');
ok(r.exitCode === 4, 'codeRun: its exit code', r);
r = await sb.process.executeCommand('sleep 20', undefined, undefined, 1).catch((e) => e);
ok(r instanceof Error && /timed out/.test(r.message), 'executeCommand past its timeout is an error', String(r));

// files
await sb.fs.uploadFile(Buffer.from('a: 1\nb: 2\n'), '/workspace/app/config.yaml');
nat = await native('GET', `/v1/sandboxes/${sb.id}/files/download?path=/workspace/app/config.yaml`);
ok(nat.status === 200 && nat.buf.toString() === 'a: 1\nb: 2\n', 'uploadFile: deskbox reads the file back (parents made)', nat.buf.toString());
const bin = Buffer.alloc(300000);
for (let i = 0; i < bin.length; i++) bin[i] = (i * 7 + 3) & 0xff;
await sb.fs.uploadFiles([{ source: bin, destination: '/workspace/bin.dat' },
  { source: Buffer.from('second'), destination: 'rel.txt' }]);
nat = await native('GET', `/v1/sandboxes/${sb.id}/files/download?path=/workspace/bin.dat`);
ok(nat.status === 200 && Buffer.compare(nat.buf, bin) === 0, 'uploadFiles: 300 kB of binary arrive exact', nat.buf.length);
nat = await native('GET', `/v1/sandboxes/${sb.id}/files/download?path=/workspace/rel.txt`);
ok(nat.status === 200 && nat.buf.toString() === 'second', 'uploadFiles: a relative destination is under /workspace', nat.status);
await native('PUT', `/v1/sandboxes/${sb.id}/files/upload?path=/workspace/native.txt`, 'from deskbox');
let buf = await sb.fs.downloadFile('/workspace/native.txt');
ok(Buffer.isBuffer(buf) && buf.toString() === 'from deskbox', 'downloadFile: a file deskbox wrote', buf?.toString());
buf = await sb.fs.downloadFile('/workspace/bin.dat');
ok(Buffer.compare(buf, bin) === 0, 'downloadFile: binary exact', buf.length);
await rejects(sb.fs.downloadFile('/workspace/none.txt'), DaytonaNotFoundError, 'downloadFile of a missing file: DaytonaNotFoundError');
const many = await sb.fs.downloadFiles([{ source: '/workspace/rel.txt' }, { source: '/workspace/none' }]);
ok(many.length === 2 && many[0].result?.toString() === 'second' && many[1].error,
  'downloadFiles: a file and an error, each for its path', many.map((m) => [m.source, m.error, String(m.result)]));
await sb.fs.createFolder('/workspace/dir/sub', '750');
nat = await native('GET', `/v1/sandboxes/${sb.id}/files/stat?path=/workspace/dir/sub`);
ok(nat.status === 200 && nat.json.type === 'dir' && nat.json.mode === 0o750, 'createFolder with its mode', nat.json);
const list = await sb.fs.listFiles('/workspace');
const fnames = list.map((f) => f.name).sort();
ok(fnames.includes('app') && fnames.includes('bin.dat') && list.find((f) => f.name === 'app').isDir === true
  && list.find((f) => f.name === 'bin.dat').size === 300000, 'listFiles', fnames);
const info = await sb.fs.getFileDetails('/workspace/bin.dat');
ok(info.size === 300000 && info.isDir === false && info.name === 'bin.dat', 'getFileDetails', info);
await sb.fs.moveFiles('/workspace/rel.txt', '/workspace/dir/moved.txt');
nat = await native('GET', `/v1/sandboxes/${sb.id}/files/download?path=/workspace/dir/moved.txt`);
ok(nat.status === 200 && nat.buf.toString() === 'second', 'moveFiles', nat.status);
await sb.fs.deleteFile('/workspace/dir', true);
nat = await native('GET', `/v1/sandboxes/${sb.id}/files/stat?path=/workspace/dir`);
ok(nat.status === 404, 'deleteFile recursive: deskbox no longer finds it', nat.status);
ok(await sb.getUserHomeDir() === '/home/user' && await sb.getWorkDir() === '/workspace', 'home and work dirs');

// find, search, replace
await sb.fs.uploadFiles([{ source: Buffer.from('alpha\nneedle one\nbeta\n'), destination: '/workspace/src/a.txt' },
  { source: Buffer.from('needle two\n'), destination: '/workspace/src/sub/b.md' }]);
const hits = await sb.fs.findFiles('/workspace/src', 'needle');
ok(hits.length === 2 && hits.some((h) => h.file === '/workspace/src/a.txt' && h.line === 2 && h.content === 'needle one'),
  'findFiles: the lines holding the text', hits);
const names = await sb.fs.searchFiles('/workspace/src', '*.md');
ok(names.files?.length === 1 && names.files[0] === '/workspace/src/sub/b.md', 'searchFiles: names by glob', names);
const rep = await sb.fs.replaceInFiles(['/workspace/src/a.txt', '/workspace/src/none.txt'], 'needle', 'pin');
nat = await native('GET', `/v1/sandboxes/${sb.id}/files/download?path=/workspace/src/a.txt`);
ok(rep.length === 2 && rep[0].success === true && rep[1].success === false && nat.buf.toString() === 'alpha\npin one\nbeta\n',
  'replaceInFiles: replaced in the file (deskbox reads it), a missing one reported', [rep, nat.buf.toString()]);

await sb.fs.setFilePermissions('/workspace/src/a.txt', { mode: '640' });
nat = await native('GET', `/v1/sandboxes/${sb.id}/files/stat?path=/workspace/src/a.txt`);
ok(nat.json?.mode === 0o640, 'setFilePermissions: the mode', nat.json);
await rejects(sb.fs.setFilePermissions('/workspace/src/a.txt', { owner: 'root' }), DaytonaValidationError,
  'setFilePermissions with an owner by name: refused as not supported');

// computer use, checked through deskbox's desktop API and the X server
const cu = sb.computerUse;
const dinfo = (await native('GET', `/v1/sandboxes/${sb.id}/desktop/info`)).json;
let shot = await cu.screenshot.takeFullScreen();
let png = Buffer.from(shot.screenshot || '', 'base64');
ok(png.subarray(1, 4).toString() === 'PNG' && png.readUInt32BE(16) === dinfo.width && png.readUInt32BE(20) === dinfo.height,
  'screenshot: a base64 PNG of the whole screen', [shot.sizeBytes, dinfo.width, dinfo.height]);
shot = await cu.screenshot.takeCompressedRegion({ x: 10, y: 20, width: 300, height: 200 }, { format: 'jpeg', quality: 60 });
png = Buffer.from(shot.screenshot || '', 'base64');
ok(png[0] === 0xff && png[1] === 0xd8 && shot.width === 300 && shot.height === 200, 'takeCompressedRegion: a 300x200 JPEG', [shot.width, shot.height]);
const disp = await cu.display.getInfo();
ok(disp.displays?.[0]?.width === dinfo.width && disp.displays[0].height === dinfo.height, 'display.getInfo', disp);
let pos = await cu.mouse.move(123, 234);
nat = await native('GET', `/v1/sandboxes/${sb.id}/desktop/cursor`);
ok(pos.x === 123 && nat.json.x === 123 && nat.json.y === 234, 'mouse.move: the X server\'s pointer is there', nat.json);
pos = await cu.mouse.getPosition();
ok(pos.x === 123 && pos.y === 234, 'mouse.getPosition', pos);
const xt = await native('POST', `/v1/sandboxes/${sb.id}/desktop/launch`,
  { argv: ['xterm', '-geometry', '80x20+50+50', '-T', 'dtterm'], timeout_ms: 15000 });
const win = xt.json?.window;
ok(win && win.title === 'dtterm', 'an xterm launched through deskbox', xt.json);
if (win) {
  const wins = await cu.display.getWindows();
  ok(wins.windows.some((w) => w.title === 'dtterm' && w.width === win.width), 'display.getWindows lists it', wins);
  pos = await cu.mouse.click(win.x + 40, win.y + 40);
  ok(pos.x === win.x + 40, 'mouse.click into it', pos);
  await cu.keyboard.type('echo héllo ');
  await cu.keyboard.press('a', ['shift']);
  await cu.keyboard.hotkey('shift+b');
  await cu.keyboard.type(' > /tmp/typed.txt');
  await cu.keyboard.press('Return');
  let typed = null;
  for (let i = 0; i < 50 && typed === null; i++) {
    const f = await native('GET', `/v1/sandboxes/${sb.id}/files/download?path=/tmp/typed.txt`);
    if (f.status === 200 && f.buf.length) typed = f.buf.toString();
    else await new Promise((r) => setTimeout(r, 100));
  }
  ok(typed === 'héllo AB\n', 'keyboard type, press with a modifier and hotkey reach the X server exactly', typed);
  ok(await cu.mouse.scroll(win.x + 40, win.y + 40, 'down', 2) === true, 'mouse.scroll');
  pos = await cu.mouse.drag(win.x + 10, win.y + 10, win.x + 60, win.y + 30);
  // The X server takes the last motion events a moment after they are sent.
  for (let i = 0; i < 40; i++) {
    nat = await native('GET', `/v1/sandboxes/${sb.id}/desktop/cursor`);
    if (nat.json.x === win.x + 60 && nat.json.y === win.y + 30) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  ok(pos.x === win.x + 60 && nat.json.x === win.x + 60 && nat.json.y === win.y + 30, 'mouse.drag ends where asked', nat.json);
}
const st = await cu.getStatus();
ok(st.status === 'active', 'computerUse.getStatus', st);
const started = await cu.start();
ok(started.status?.xvfb?.running === true, 'computerUse.start: the desktop runs', started);

// sessions: deskbox's persistent shells
await sb.process.createSession('s-1');
let sr = await sb.process.executeSessionCommand('s-1', { command: 'cd /tmp && export Z=zed' });
ok(sr.exitCode === 0 && typeof sr.cmdId === 'string', 'executeSessionCommand', sr);
sr = await sb.process.executeSessionCommand('s-1', { command: 'pwd; echo $Z; echo e >&2' });
ok(sr.exitCode === 0 && sr.stdout === '/tmp\nzed\n' && sr.stderr === 'e\n', 'a session keeps cwd and exports between commands', sr);
ok((await sb.process.getSession('s-1')).sessionId === 's-1', 'getSession');
const sessions = await sb.process.listSessions();
ok(sessions.length === 1 && sessions[0].sessionId === 's-1', 'listSessions', sessions);
ok(!Object.keys((await daytona.get(sb.id)).labels).some((k) => k.startsWith('daytona/')), 'session bookkeeping stays out of the labels');
await rejects(sb.process.createSession('s-1'), Error, 'a second session of the same name is refused');
await rejects(sb.process.executeSessionCommand('s-1', { command: 'sleep 1', runAsync: true }), DaytonaValidationError, 'runAsync: refused as not supported');
await sb.process.deleteSession('s-1');
await rejects(sb.process.executeSessionCommand('s-1', { command: 'true' }), DaytonaNotFoundError, 'a deleted session is not found');

// control plane
const got = await daytona.get(sb.id);
ok(got.id === sb.id && got.state === 'started' && got.labels.team === 'qa', 'get', got.state);
async function ids(q) {
  const out = [];
  for await (const s of daytona.list(q)) out.push(s.id);
  return out;
}
const other = await native('POST', '/v1/sandboxes', { metadata: { team: 'other' } });
let listed = await ids({ labels: { team: 'qa' } });
ok(listed.length === 1 && listed[0] === sb.id, 'list by labels', listed);
ok((await ids({ labels: { team: 'none' } })).length === 0, 'list by labels that match none');
listed = await ids();
ok(listed.length === 2 && listed.includes(other.json.id), 'list without a query: deskbox\'s own sandboxes too', listed);
await native('DELETE', `/v1/sandboxes/${other.json.id}`);
await sb.setLabels({ team: 'ops', tier: '1' });
nat = await native('GET', `/v1/sandboxes/${sb.id}`);
ok(nat.json.metadata.team === 'ops' && nat.json.metadata.tier === '1'
  && nat.json.metadata['code-toolbox-language'] === 'python', 'setLabels replaces them, the language kept', nat.json.metadata);
await sb.setAutostopInterval(30);
nat = await native('GET', `/v1/sandboxes/${sb.id}`);
ok(nat.json.timeout_s > 1790 && nat.json.timeout_s <= 1800 && nat.json.on_timeout === 'stop', 'setAutostopInterval: a 30 min timeout that stops it', nat.json);
await sb.setAutostopInterval(0);
await native('PUT', `/v1/sandboxes/${sb.id}/files/upload?path=/workspace/keep.txt`, 'kept');
await sb.stop();
nat = await native('GET', `/v1/sandboxes/${sb.id}`);
ok(sb.state === 'stopped' && nat.json.status === 'stopped', 'stop', [sb.state, nat.json.status]);
await sb.start();
nat = await native('GET', `/v1/sandboxes/${sb.id}`);
ok(sb.state === 'started' && nat.json.status === 'running', 'start', [sb.state, nat.json.status]);
r = await sb.process.executeCommand('cat /workspace/keep.txt');
ok(r.result === 'kept', 'files survive stop and start', r);
const py = await (await daytona.get(sb.id)).process.codeRun('print(6*7)');
ok(py.result === '42\n', 'codeRun through a sandbox from get() after setLabels', py);

// errors
await rejects(daytona.get('no-such-sandbox'), DaytonaNotFoundError, 'get of an unknown sandbox: DaytonaNotFoundError');
await rejects(daytona.create({ image: 'python:3.12' }), DaytonaValidationError, 'create from an image build: refused as not supported');
await rejects(daytona.create({ resources: { gpu: 1 } }), DaytonaValidationError, 'create with a GPU: refused as not supported');
const e = await rejects(sb.archive(), Error, 'archive: refused');
ok(e && /not supported/.test(e.message), 'archive says it is not supported', e?.message);

await sb.delete();
nat = await native('GET', `/v1/sandboxes/${sb.id}`);
ok(nat.status === 404, 'delete: deskbox no longer has it', nat.status);

const eph = await daytona.create({ ephemeral: true, autoStopInterval: 5 });
nat = await native('GET', `/v1/sandboxes/${eph.id}`);
ok(nat.json.on_timeout === 'delete' && nat.json.timeout_s === 300, 'ephemeral with autoStopInterval: deleted when it times out', nat.json);
await eph.delete();

console.log(`1..${n}`);
process.exit(failed ? 1 : 0);
