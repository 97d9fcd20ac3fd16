// E2B's control plane through the official `e2b` SDK, unchanged, pointed at
// deskboxd by E2B_API_URL / E2B_SANDBOX_URL = http://HOST:PORT/e2b.  Every
// effect is checked through deskbox's own API (/v1, DESKBOX_URL).  TAP.
import { Sandbox, SandboxNotFoundError, AuthenticationError } from 'e2b'

const base = process.env.DESKBOX_URL
const token = process.env.DESKBOX_TOKEN
let n = 0, failed = 0
function ok(cond, name, detail) {
  n++
  if (!cond) failed++
  console.log(`${cond ? 'ok' : 'not ok'} ${n} - ${name}`)
  if (!cond && detail !== undefined) console.log('# ' + JSON.stringify(detail).slice(0, 800))
}
async function native(path, method = 'GET', body) {
  const headers = { Authorization: 'Bearer ' + token }
  if (body) headers['Content-Type'] = 'application/json'
  const r = await fetch(base + path, { method, headers, body: body && JSON.stringify(body) })
  return { status: r.status, body: r.status === 204 ? null : await r.json() }
}
async function throws(fn, cls) {
  try { await fn(); return 'no error' } catch (err) { return err instanceof cls ? true : `${err.name}: ${err.message}` }
}

const run = 'r' + process.pid
const sbx = await Sandbox.create({ metadata: { suite: 'compat', run }, envs: { FOO: 'bar' }, timeoutMs: 120_000 })
const id = sbx.sandboxId
let v = await native('/v1/sandboxes/' + id)
ok(v.status === 200 && v.body.status === 'running', 'create: the sandbox runs in deskbox', v)
ok(v.body.metadata && v.body.metadata.run === run && v.body.metadata.suite === 'compat', 'create: metadata kept', v.body.metadata)
ok(v.body.timeout_s === 120 && v.body.on_timeout === 'delete', 'create: timeoutMs is a deadline that kills', v.body)
const ex = await native(`/v1/sandboxes/${id}/process/exec`, 'POST', { argv: ['sh', '-c', 'printf %s "$FOO"'] })
ok(ex.status === 200 && ex.body.stdout === 'bar', 'create: envs become the sandbox env', ex)

const other = await Sandbox.create('base', { timeoutMs: 60_000 })
const info = await sbx.getInfo()
ok(info.sandboxId === id && info.state === 'running' && info.templateId === 'base' &&
   info.metadata.run === run && !('e2b.template' in info.metadata), 'getInfo: id, state, template, metadata', info)
ok(info.endAt instanceof Date && info.endAt - info.startedAt >= 100_000, 'getInfo: startedAt/endAt dates', info)

const listed = await Sandbox.list({ query: { metadata: { run } } }).nextItems()
ok(listed.length === 1 && listed[0].sandboxId === id, 'list: the metadata query finds only the one', listed.map(s => s.sandboxId))
const all = await Sandbox.list().nextItems()
ok(all.some(s => s.sandboxId === other.sandboxId) && all.some(s => s.sandboxId === id), 'list: both without a query')
const running = await Sandbox.list({ query: { state: ['paused'] } }).nextItems()
ok(!running.some(s => s.sandboxId === id), 'list: a state filter leaves running ones out')

await sbx.setTimeout(45_000)
v = await native('/v1/sandboxes/' + id)
ok(v.body.timeout_s === 45, 'setTimeout: the deadline moves', v.body)

ok(await Sandbox.pause(id) === true, 'pause: true')
v = await native('/v1/sandboxes/' + id)
ok(v.body.status === 'paused', 'pause: deskbox shows it paused', v.body.status)
ok(await Sandbox.pause(id) === false, 'pause again: false (E2B code 409)')
const paused = await Sandbox.list({ query: { state: ['paused'], metadata: { run } } }).nextItems()
ok(paused.length === 1 && paused[0].state === 'paused', 'list: the paused one by state', paused)

const again = await Sandbox.connect(id, { timeoutMs: 90_000 })
v = await native('/v1/sandboxes/' + id)
ok(again.sandboxId === id && v.body.status === 'running', 'connect: resumes it', v.body.status)
ok(v.body.timeout_s === 90, 'connect: timeoutMs moves the deadline', v.body.timeout_s)

ok(await sbx.kill() === true, 'kill: true')
v = await native('/v1/sandboxes/' + id)
ok(v.status === 404, 'kill: deskbox no longer has it', v.status)
ok(await Sandbox.kill(id) === false, 'kill of an unknown sandbox: false (E2B code 404)')
ok(await throws(() => Sandbox.connect(id), SandboxNotFoundError) === true, 'connect to an unknown sandbox: SandboxNotFoundError')
ok(await throws(() => Sandbox.getInfo(id), SandboxNotFoundError) === true, 'getInfo of an unknown sandbox: SandboxNotFoundError')
ok(await throws(() => Sandbox.setTimeout(id, 1000), SandboxNotFoundError) === true, 'setTimeout of an unknown sandbox: SandboxNotFoundError')
ok(await throws(() => Sandbox.list({ apiKey: 'wrong' }).nextItems(), AuthenticationError) === true, 'a wrong API key: AuthenticationError')
ok(await Sandbox.kill(other.sandboxId) === true, 'Sandbox.kill by id')

console.log(`1..${n}`)
process.exit(failed ? 1 : 0)
