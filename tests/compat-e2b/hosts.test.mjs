// E2B's host names under deskboxd's --ports-domain, over HTTPS: no
// E2B_SANDBOX_URL, so the official SDK reaches envd and the code interpreter
// at https://{49983|49999}-{id}.DOMAIN:PORT (the domain the create answers),
// and getHost(port) names a sandbox port that deskbox's port proxy serves.
import { Sandbox } from '@e2b/code-interpreter'

const base = process.env.DESKBOX_URL
const token = process.env.DESKBOX_TOKEN
const domain = process.env.E2B_TEST_DOMAIN
let n = 0, failed = 0
function ok(cond, name, detail) {
  n++
  if (!cond) failed++
  console.log(`${cond ? 'ok' : 'not ok'} ${n} - ${name}`)
  if (!cond && detail !== undefined) console.log('# ' + String(JSON.stringify(detail)).slice(0, 800))
}
async function until(cond, ms = 15000) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await cond()) return true
    await new Promise(r => setTimeout(r, 100))
  }
  return !!(await cond())
}

ok(!process.env.E2B_SANDBOX_URL && base.startsWith('https://'), 'no E2B_SANDBOX_URL; the API over https', base)
const sbx = await Sandbox.create({ timeoutMs: 300_000 })
const id = sbx.sandboxId
try {
  const port = new URL(base).port
  ok(sbx.sandboxDomain === `${domain}:${port}`, 'the create answers the ports domain (with the port) as the sandbox domain', sbx.sandboxDomain)
  ok(sbx.getHost(49983) === `49983-${id}.${domain}:${port}`, 'getHost: {port}-{id}.DOMAIN', sbx.getHost(49983))
  const r = await sbx.commands.run('echo over-tls-$((40+2))')
  ok(r.stdout === 'over-tls-42\n', 'commands.run through https://49983-{id}.DOMAIN', r)
  await sbx.files.write('/workspace/tls.txt', 'via host name')
  const d = await fetch(`${base}/v1/sandboxes/${id}/files/download?path=/workspace/tls.txt`, { headers: { Authorization: 'Bearer ' + token } })
  ok(d.status === 200 && await d.text() === 'via host name', 'files.write through the host name, read back through /v1', d.status)
  const ex = await sbx.runCode('6 * 7')
  ok(ex.text === '42', 'runCode through https://49999-{id}.DOMAIN', ex.text)
  // a sandbox port through the port proxy, by the name getHost gives
  const srv = await sbx.commands.run('cd /tmp && echo served > index.html && exec python3 -m http.server 8000 --bind 127.0.0.1', { background: true, timeoutMs: 0 })
  const url = `https://${sbx.getHost(8000)}/index.html`
  let body = ''
  ok(await until(async () => {
    try {
      const a = await fetch(url, { headers: { Authorization: 'Bearer ' + token } })
      body = await a.text()
      return a.status === 200 && body === 'served\n'
    } catch (e) { body = String(e.cause || e); return false }
  }), 'a sandbox port at https://{port}-{id}.DOMAIN (getHost), through deskbox\'s port proxy', body)
  await srv.kill()
} finally {
  await sbx.kill()
}
console.log(`1..${n}`)
process.exit(failed ? 1 : 0)
