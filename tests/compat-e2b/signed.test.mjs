// The signed URLs of the official SDK (uploadUrl, downloadUrl), over HTTPS
// with deskboxd's --ports-domain: the SDK builds them on
// https://49983-{id}.DOMAIN/files, signed with the create's envdAccessToken.
// They are used here by plain clients (Node's fetch and the curl command)
// that send no token, as they are meant to be; the effects are checked
// through deskbox's own files API.
import { Sandbox } from 'e2b'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const base = process.env.DESKBOX_URL
const token = process.env.DESKBOX_TOKEN
const ca = process.env.NODE_EXTRA_CA_CERTS
let n = 0, failed = 0
function ok(cond, name, detail) {
  n++
  if (!cond) failed++
  console.log(`${cond ? 'ok' : 'not ok'} ${n} - ${name}`)
  if (!cond && detail !== undefined) console.log('# ' + String(JSON.stringify(detail)).slice(0, 800))
}
const auth = { Authorization: 'Bearer ' + token }
async function v1read(id, path) {
  const r = await fetch(`${base}/v1/sandboxes/${id}/files/download?path=${encodeURIComponent(path)}`, { headers: auth })
  return r.status === 200 ? await r.text() : `status ${r.status}`
}
async function refused(res) {
  const body = await res.text()
  let j = {}
  try { j = JSON.parse(body) } catch {}
  return res.status === 401 && j.code === 401 && typeof j.message === 'string' ? true : { status: res.status, body }
}
function form(name, text) {
  const f = new FormData()
  f.append('file', new Blob([text]), name)
  return f
}

const sbx = await Sandbox.create({ secure: true, timeoutMs: 300_000 })
const id = sbx.sandboxId
const tmp = mkdtempSync(join(tmpdir(), 'dbx-e2b-signed-'))
try {
  ok(typeof sbx.envdAccessToken === 'string' && sbx.envdAccessToken.length > 0, 'the create hands out an envdAccessToken')
  const up = new URL(await sbx.uploadUrl('/workspace/up.txt'))
  ok(up.hostname.startsWith(`49983-${id}.`) && up.pathname === '/files' && /^v1_[A-Za-z0-9+/]{43}$/.test(up.searchParams.get('signature')),
    'uploadUrl: https://49983-{id}.DOMAIN/files with a v1_ signature', up.toString())
  let r = await fetch(up, { method: 'POST', body: form('up.txt', 'uploaded by a plain fetch') })
  let body = await r.text()
  ok(r.status === 200 && JSON.parse(body)[0]?.path === '/workspace/up.txt', 'a plain fetch POSTs a form to the upload URL, no token', { status: r.status, body })
  ok(await v1read(id, '/workspace/up.txt') === 'uploaded by a plain fetch', 'the uploaded file read back through deskbox\'s /v1 files API')

  const down = await sbx.downloadUrl('/workspace/up.txt')
  r = await fetch(down)
  ok(r.status === 200 && await r.text() === 'uploaded by a plain fetch', 'a plain fetch GETs the download URL, no token', r.status)

  // with an expiry an hour off: still good
  const later = new URL(await sbx.downloadUrl('/workspace/up.txt', { useSignatureExpiration: 3600 }))
  const exp = Number(later.searchParams.get('signature_expiration'))
  ok(exp > Date.now() / 1000 + 3000, 'downloadUrl with useSignatureExpiration carries signature_expiration', later.toString())
  r = await fetch(later)
  ok(r.status === 200 && await r.text() === 'uploaded by a plain fetch', 'a signature that expires in an hour is honoured', r.status)
  // the SDK's own URL, signed to have expired ten seconds ago
  const expired = await sbx.downloadUrl('/workspace/up.txt', { useSignatureExpiration: -10 })
  ok(await refused(await fetch(expired)), 'an expired signature: 401 {code, message}')
  const expiredUp = await sbx.uploadUrl('/workspace/late.txt', { useSignatureExpiration: -10 })
  ok(await refused(await fetch(expiredUp, { method: 'POST', body: form('late.txt', 'late') })), 'an expired upload URL: 401')
  ok(await v1read(id, '/workspace/late.txt') === 'status 404', 'and nothing was written')
  // a later expiry put on an expired URL breaks its signature
  const moved = new URL(expired)
  moved.searchParams.set('signature_expiration', String(exp))
  ok(await refused(await fetch(moved)), 'an expired URL given a later signature_expiration: 401')

  // tampered signatures
  const bad = new URL(down)
  const s = bad.searchParams.get('signature')
  bad.searchParams.set('signature', s.slice(0, -1) + (s.endsWith('A') ? 'B' : 'A'))
  ok(await refused(await fetch(bad)), 'a signature with one character changed: 401')
  await sbx.files.write('/workspace/other.txt', 'not signed for')
  const other = new URL(down)
  other.searchParams.set('path', '/workspace/other.txt')
  ok(await refused(await fetch(other)), 'a signature of another path: 401')
  const asUser = new URL(down)
  asUser.searchParams.set('username', 'root')
  ok(await refused(await fetch(asUser)), 'a signature with a username it was not made for: 401')
  ok(await refused(await fetch(down, { method: 'POST', body: form('up.txt', 'overwritten') })), 'a read signature used to write: 401')
  ok(await v1read(id, '/workspace/up.txt') === 'uploaded by a plain fetch', 'and the file is unchanged')
  const bare = new URL(down)
  bare.searchParams.delete('signature')
  ok(await refused(await fetch(bare)), 'no signature and no token: 401')

  // the SDK's own calls of a secure sandbox still go through
  await sbx.files.write('/workspace/sdk.txt', 'sdk write')
  ok(await sbx.files.read('/workspace/sdk.txt') === 'sdk write', 'files.write and files.read of a secure sandbox (X-Access-Token)')

  // curl, a plain HTTP client
  let curl = null
  try { execFileSync('curl', ['--version'], { stdio: 'ignore' }); curl = 'curl' } catch {}
  if (!curl) {
    console.log('ok ' + (++n) + ' - # SKIP curl: the curl command is not installed')
  } else {
    const u = new URL(await sbx.uploadUrl('/workspace/curl.txt'))
    const resolve = `${u.hostname}:${u.port || 443}:127.0.0.1`
    const file = join(tmp, 'curl.txt')
    writeFileSync(file, 'sent by curl')
    const out = execFileSync(curl, ['-sS', '--cacert', ca, '--resolve', resolve, '-o', '/dev/null', '-w', '%{http_code}',
      '-F', `file=@${file}`, u.toString()]).toString()
    ok(out === '200' && await v1read(id, '/workspace/curl.txt') === 'sent by curl', 'curl -F to the upload URL writes the file', out)
    const got = execFileSync(curl, ['-sS', '--cacert', ca, '--resolve', resolve, await sbx.downloadUrl('/workspace/curl.txt')]).toString()
    ok(got === 'sent by curl', 'curl GETs the download URL', got)
    const code = execFileSync(curl, ['-sS', '--cacert', ca, '--resolve', resolve, '-o', '/dev/null', '-w', '%{http_code}',
      await sbx.downloadUrl('/workspace/curl.txt', { useSignatureExpiration: -5 })]).toString()
    ok(code === '401', 'curl with an expired URL: 401', code)
  }
} finally {
  rmSync(tmp, { recursive: true, force: true })
  await sbx.kill()
}
console.log(`1..${n}`)
process.exit(failed ? 1 : 0)
