// E2B's in-sandbox plane (envd: commands, filesystem, /files, /health)
// through the official `e2b` SDK, unchanged, with E2B_SANDBOX_URL =
// http://HOST:PORT/e2b.  Effects are checked through deskbox's own API.
import { Sandbox, CommandExitError, FileNotFoundError } from 'e2b'

const base = process.env.DESKBOX_URL
const token = process.env.DESKBOX_TOKEN
let n = 0, failed = 0
function ok(cond, name, detail) {
  n++
  if (!cond) failed++
  console.log(`${cond ? 'ok' : 'not ok'} ${n} - ${name}`)
  if (!cond && detail !== undefined) console.log('# ' + String(JSON.stringify(detail)).slice(0, 800))
}
async function native(path, method = 'GET', body, raw) {
  const headers = { Authorization: 'Bearer ' + token }
  if (body && !raw) headers['Content-Type'] = 'application/json'
  const r = await fetch(base + path, { method, headers, body: raw ? body : body && JSON.stringify(body) })
  const text = await r.text()
  return { status: r.status, text, json: () => JSON.parse(text) }
}

const sbx = await Sandbox.create({ envs: { FOO: 'from-create' }, timeoutMs: 300_000 })
const id = sbx.sandboxId
const sb = '/v1/sandboxes/' + id
try {
  let r = await sbx.commands.run('echo hello; echo oops >&2')
  ok(r.exitCode === 0 && r.stdout === 'hello\n' && r.stderr === 'oops\n', 'commands.run: stdout, stderr, exit code', r)

  const seen = []
  r = await sbx.commands.run('for i in 1 2 3; do echo line$i; sleep 0.1; done', { onStdout: (d) => seen.push(d) })
  ok(seen.join('') === 'line1\nline2\nline3\n' && seen.length >= 2, 'commands.run: onStdout gets output as it comes', seen)

  r = await sbx.commands.run('printf "%s %s %s" "$FOO" "$BAR" "$PWD"', { envs: { BAR: 'per-call' }, cwd: '/tmp' })
  ok(r.stdout === 'from-create per-call /tmp', 'commands.run: sandbox envs, call envs, cwd', r.stdout)

  let err = null
  try { await sbx.commands.run('echo partial; exit 3') } catch (e) { err = e }
  ok(err instanceof CommandExitError && err.exitCode === 3 && err.stdout === 'partial\n', 'a failing command: CommandExitError with its exit code', err && err.message)

  r = await sbx.commands.run('touch /tmp/made-by-e2b')
  const st = await native(`${sb}/files/stat?path=/tmp/made-by-e2b`)
  ok(st.status === 200, 'a command\'s effect is seen through deskbox\'s files API', st.text)

  const w = await sbx.files.write('/workspace/e2b/hello.txt', 'hi from e2b\n')
  ok(w.path === '/workspace/e2b/hello.txt' && w.name === 'hello.txt', 'files.write: the entry', w)
  let d = await native(`${sb}/files/download?path=/workspace/e2b/hello.txt`)
  ok(d.status === 200 && d.text === 'hi from e2b\n', 'files.write: read back through /v1 files/download', d)

  const up = await native(`${sb}/files/upload?path=/workspace/e2b/native.bin`, 'PUT', new Uint8Array([0, 1, 2, 255, 10]), true)
  const bytes = await sbx.files.read('/workspace/e2b/native.bin', { format: 'bytes' })
  ok(up.status < 300 && Buffer.from(bytes).equals(Buffer.from([0, 1, 2, 255, 10])), 'files.read: bytes uploaded through /v1', [up.status, Array.from(bytes)])
  ok(await sbx.files.read('/workspace/e2b/hello.txt') === 'hi from e2b\n', 'files.read: text')

  const many = await sbx.files.write([{ path: '/workspace/e2b/m/one.txt', data: '1' }, { path: '/workspace/e2b/m/two.txt', data: '22' }])
  d = await native(`${sb}/files/download?path=/workspace/e2b/m/two.txt`)
  ok(many.length === 2 && d.text === '22', 'files.write of several files in one request', many)

  ok(await sbx.files.makeDir('/workspace/e2b/dir') === true, 'files.makeDir: true')
  ok(await sbx.files.makeDir('/workspace/e2b/dir') === false, 'files.makeDir of an existing one: false')
  const list = await sbx.files.list('/workspace/e2b')
  const names = list.map(e => `${e.name}:${e.type}`).sort()
  ok(JSON.stringify(names) === JSON.stringify(['dir:dir', 'hello.txt:file', 'm:dir', 'native.bin:file']), 'files.list: names and types', names)
  const hello = list.find(e => e.name === 'hello.txt')
  ok(hello && hello.size === 12 && hello.path === '/workspace/e2b/hello.txt' && /^-rw/.test(hello.permissions), 'files.list: size, path, permissions', hello)

  ok(await sbx.files.exists('/workspace/e2b/hello.txt') === true, 'files.exists: true')
  ok(await sbx.files.exists('/workspace/e2b/nope') === false, 'files.exists of a missing file: false')
  let nf = null
  try { await sbx.files.getInfo('/workspace/e2b/nope') } catch (e) { nf = e }
  ok(nf instanceof FileNotFoundError, 'files.getInfo of a missing file: FileNotFoundError', nf && nf.message)
  nf = null
  try { await sbx.files.read('/workspace/e2b/nope') } catch (e) { nf = e }
  ok(nf instanceof FileNotFoundError, 'files.read of a missing file: FileNotFoundError', nf && `${nf.name} ${nf.message}`)

  const moved = await sbx.files.rename('/workspace/e2b/hello.txt', '/workspace/e2b/dir/moved.txt')
  d = await native(`${sb}/files/download?path=/workspace/e2b/dir/moved.txt`)
  const gone = await native(`${sb}/files/stat?path=/workspace/e2b/hello.txt`)
  ok(moved.path === '/workspace/e2b/dir/moved.txt' && d.text === 'hi from e2b\n' && gone.status === 404, 'files.rename: moved in deskbox', [moved, d.status, gone.status])

  await sbx.files.remove('/workspace/e2b/dir')
  const rm = await native(`${sb}/files/stat?path=/workspace/e2b/dir`)
  ok(rm.status === 404, 'files.remove: a directory and what it holds are gone', rm.status)

  await sbx.files.makeDir('/workspace/w')
  const events = []
  const wh = await sbx.files.watchDir('/workspace/w', (ev) => events.push(`${ev.type}:${ev.name}`))
  await native(`${sb}/files/upload?path=/workspace/w/native.txt`, 'PUT', 'x', true)
  await sbx.commands.run('mv /workspace/w/native.txt /workspace/w/moved.txt; rm /workspace/w/moved.txt')
  for (let i = 0; i < 50 && !events.includes('remove:moved.txt'); i++) await new Promise(r => setTimeout(r, 100))
  await wh.stop()
  ok(events.includes('create:native.txt') && events.includes('rename:native.txt') && events.includes('remove:moved.txt'),
     'watchDir: a /v1 upload, a move and a removal as create, rename, remove events', events)

  const bg = await sbx.commands.run('sleep 30', { background: true })
  const procs = await sbx.commands.list()
  const mine = procs.find(p => p.pid === bg.pid)
  ok(bg.pid > 0 && mine && mine.cmd === '/bin/bash' && mine.args.includes('sleep 30'), 'commands.list: the background command with its pid and config', procs)
  ok(await sbx.commands.kill(bg.pid) === true, 'commands.kill: true')
  let ended = null
  try { ended = await bg.wait() } catch (e) { ended = e }
  ok(ended && ended.exitCode !== 0, 'the killed command ends with a failing exit', ended && ended.exitCode)
  const ps = await native(`${sb}/process/exec`, 'POST', { argv: ['sh', '-c', 'pgrep -x sleep || true'] })
  ok(ps.status === 200 && ps.json().stdout === '', 'the killed command is gone from the sandbox (pgrep through /v1)', ps.text)
  ok(!(await sbx.commands.list()).some(p => p.pid === bg.pid), 'commands.list: no longer listed')
  ok(await sbx.commands.kill(999999) === false, 'commands.kill of an unknown pid: false')

  ok(await sbx.isRunning() === true, 'isRunning: /health answers')
} finally {
  await sbx.kill()
}
const after = await native(sb)
ok(after.status === 404, 'kill: gone from deskbox')
console.log(`1..${n}`)
process.exit(failed ? 1 : 0)
