// E2B's envd process service beyond Start/List/kill, through the official
// `e2b` SDK, unchanged: stdin (sendStdin, closeStdin), a program that
// outlives its stream and is reattached (commands.connect), the deadline,
// and PTYs (pty.create, sendInput, resize, kill) on deskbox's terminals.
// Effects are checked through deskbox's own API (/v1 process and terminals).
import { Sandbox } from 'e2b'

const base = process.env.DESKBOX_URL
const token = process.env.DESKBOX_TOKEN
let n = 0, failed = 0
function ok(cond, name, detail) {
  n++
  if (!cond) failed++
  console.log(`${cond ? 'ok' : 'not ok'} ${n} - ${name}`)
  if (!cond && detail !== undefined) console.log('# ' + String(JSON.stringify(detail)).slice(0, 800))
}
async function native(path, method = 'GET', body) {
  const headers = { Authorization: 'Bearer ' + token }
  if (body) headers['Content-Type'] = 'application/json'
  const r = await fetch(base + path, { method, headers, body: body && JSON.stringify(body) })
  const text = await r.text()
  return { status: r.status, text, json: () => JSON.parse(text) }
}
// Waits (bounded) until cond() holds; returns whether it did.
async function until(cond, ms = 10000) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await cond()) return true
    await new Promise(r => setTimeout(r, 50))
  }
  return !!(await cond())
}

const sbx = await Sandbox.create({ timeoutMs: 300_000 })
const id = sbx.sandboxId
const sb = '/v1/sandboxes/' + id
const dec = new TextDecoder()
try {
  // stdin: sendStdin on the handle and by pid, then closeStdin (EOF)
  let out = ''
  const h = await sbx.commands.run('read a; echo got:$a; read b; echo got:$b; cat; echo eof', {
    background: true, stdin: true, onStdout: (d) => { out += d },
  })
  let info = await native(`${sb}/process/${h.pid}`)
  ok(info.status === 200 && info.json().status === 'running', 'a background command is a deskbox background run (/v1 process/{pid})', info.text)
  await h.sendStdin('one\n')
  ok(await until(() => out.includes('got:one\n')), 'handle.sendStdin: the program reads it', out)
  await sbx.commands.sendStdin(h.pid, 'two\nthree\n')
  ok(await until(() => out.includes('got:two\nthree\n')), 'commands.sendStdin by pid: read by the program', out)
  await sbx.commands.closeStdin(h.pid)
  let r = await h.wait()
  ok(r.exitCode === 0 && r.stdout === 'got:one\ngot:two\nthree\neof\n', 'commands.closeStdin: the program reads EOF and ends', r)
  info = await native(`${sb}/process/${h.pid}`)
  ok(info.status === 200 && info.json().status === 'exited' && info.json().exit_code === 0, 'deskbox sees it exit 0', info.text)

  // without stdin: /dev/null
  r = await sbx.commands.run('cat; echo done')
  ok(r.stdout === 'done\n', 'commands.run without stdin: stdin is empty', r)

  // a program outlives its stream; commands.connect reattaches by pid
  const bg = await sbx.commands.run('read x; echo after:$x; sleep 0.2; echo end; exit 4', { background: true, stdin: true })
  const pid = bg.pid
  await bg.disconnect()
  info = await native(`${sb}/process/${pid}`)
  ok(info.status === 200 && info.json().status === 'running', 'handle.disconnect: the program goes on (/v1 process/{pid})', info.text)
  ok((await sbx.commands.list()).some(p => p.pid === pid), 'commands.list: the disconnected program is listed')
  let seen = ''
  const again = await sbx.commands.connect(pid, { onStdout: (d) => { seen += d } })
  ok(again.pid === pid, 'commands.connect: a handle on the same pid', again.pid)
  await sbx.commands.sendStdin(pid, 'zz\n')
  let err = null
  try { await again.wait() } catch (e) { err = e }
  ok(err && err.exitCode === 4 && err.stdout === 'after:zz\nend\n' && seen === err.stdout,
     'commands.connect: its output from then on and its end (exit 4)', err && { code: err.exitCode, out: err.stdout, seen })
  err = null
  try { await sbx.commands.connect(pid) } catch (e) { err = e }
  ok(err && /not.?found/i.test(err.name + err.message), 'commands.connect to an ended program: not found', err && err.message)

  // a disconnected program's effect lands later
  const late = await sbx.commands.run('sleep 0.5; echo late > /tmp/late.txt', { background: true })
  await late.disconnect()
  ok(await until(async () => (await native(`${sb}/files/download?path=/tmp/late.txt`)).text === 'late\n'),
     'a disconnected program finishes its work (read through /v1 files)')

  // the SDK's user option: Authorization: Basic base64("root:")
  r = await sbx.commands.run('id -u; echo $HOME; touch /etc/by-e2b-root', { user: 'root' })
  ok(r.stdout === '0\n/root\n', "commands.run with user 'root': uid 0, HOME /root", r.stdout)
  let asUser = await native(`${sb}/process/exec`, 'POST', { argv: ['sh', '-c', 'id -u; stat -c %u /etc/by-e2b-root'] })
  ok(asUser.json().stdout === '1000\n0\n', "the default user is deskbox's (1000); root's file is root's (through /v1)", asUser.text)
  err = null
  try { await sbx.commands.run('true', { user: 'nobody' }) } catch (e) { err = e }
  ok(err && /nobody/.test(err.message), 'an unknown user is refused, naming it', err && err.message)

  // what a command leaves running (a daemon, `cmd &`) goes on, as in envd
  let t1 = Date.now()
  r = await sbx.commands.run('sleep 300 >/dev/null 2>&1 & echo left-$!')
  const left = Number(r.stdout.trim().slice(5))
  ok(r.exitCode === 0 && left > 0 && Date.now() - t1 < 3000, 'commands.run of `sleep 300 &` returns at once', [r.stdout, Date.now() - t1])
  let ps0 = await native(`${sb}/process/exec`, 'POST', { argv: ['sh', '-c', `kill -0 ${left} && echo alive`] })
  ok(ps0.json().stdout === 'alive\n', 'what it left running lives on (kill -0 through /v1)', ps0.text)
  await native(`${sb}/process/exec`, 'POST', { argv: ['kill', String(left)] })

  // the deadline (Connect-Timeout-Ms) ends a program
  const t0 = Date.now()
  err = null
  try { await sbx.commands.run('sleep 20', { timeoutMs: 1000 }) } catch (e) { err = e }
  ok(err && Date.now() - t0 < 8000, 'commands.run past its timeoutMs fails at once', err && err.message)
  const ps = await native(`${sb}/process/exec`, 'POST', { argv: ['sh', '-c', 'pgrep -x sleep || true'] })
  ok(ps.status === 200 && ps.json().stdout === '', 'the program past its deadline is gone (pgrep through /v1)', ps.text)

  // PTYs
  let term = ''
  const pty = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { term += dec.decode(d) } })
  let terms = (await native(`${sb}/terminals`)).json().terminals
  let mine = terms.find(t => t.pid === pty.pid)
  ok(pty.pid > 0 && mine && mine.cols === 80 && mine.rows === 24 && mine.status === 'running',
     'pty.create: a deskbox terminal of that size (/v1 terminals)', terms)
  await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('stty size; echo "T=$TERM"\n'))
  ok(await until(() => term.includes('24 80') && term.includes('T=xterm-256color')), 'pty.sendInput: the shell runs it on a tty of 24x80', term.slice(-400))
  await sbx.pty.resize(pty.pid, { cols: 100, rows: 30 })
  terms = (await native(`${sb}/terminals`)).json().terminals
  mine = terms.find(t => t.pid === pty.pid)
  ok(mine && mine.cols === 100 && mine.rows === 30, 'pty.resize: the terminal is 100x30 in /v1 terminals', mine)
  await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('stty size\n'))
  ok(await until(() => term.includes('30 100')), 'pty.resize: the shell sees 30x100', term.slice(-300))
  ok((await sbx.commands.list()).some(p => p.pid === pty.pid), 'commands.list: the PTY is listed')
  ok(await sbx.pty.kill(pty.pid) === true, 'pty.kill: true')
  let end = null
  try { end = await pty.wait() } catch (e) { end = e }
  ok(end && end.exitCode !== 0, 'the killed PTY ends', end && end.exitCode)
  terms = (await native(`${sb}/terminals`)).json().terminals
  ok(!terms.some(t => t.pid === pty.pid), 'the killed PTY is gone from /v1 terminals', terms)
  ok(await sbx.pty.kill(pty.pid) === false, 'pty.kill of a gone PTY: false')

  // a PTY reattached with pty.connect replays and goes on
  term = ''
  const p2 = await sbx.pty.create({ cols: 80, rows: 24, onData: () => {} })
  await sbx.pty.sendInput(p2.pid, new TextEncoder().encode('echo mark-$((6*7))\n'))
  await p2.disconnect()
  const p3 = await sbx.pty.connect(p2.pid, { onData: (d) => { term += dec.decode(d) } })
  await sbx.pty.sendInput(p2.pid, new TextEncoder().encode('exit 5\n'))
  end = null
  try { end = await p3.wait() } catch (e) { end = e }
  ok(term.includes('mark-42') && end && end.exitCode === 5, 'pty.connect: the output so far, then the exit code', { tail: term.slice(-200), code: end && end.exitCode })
} finally {
  await sbx.kill()
}
console.log(`1..${n}`)
process.exit(failed ? 1 : 0)
