// The E2B front-end's cost: create and one command round trip through the
// official SDK against the same through deskbox's native API.  Prints p50s.
// DESKBOX_URL, DESKBOX_TOKEN, E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY set.
import { Sandbox } from 'e2b'

const base = process.env.DESKBOX_URL, token = process.env.DESKBOX_TOKEN
const p50 = (a) => a.slice().sort((x, y) => x - y)[Math.floor(a.length / 2)]
async function native(path, body, method = 'POST') {
  const r = await fetch(base + path, { method, headers: { Authorization: 'Bearer ' + token, 'Content-Type': 'application/json' }, body: body && JSON.stringify(body) })
  return r.status === 204 ? null : r.json()
}
const N = Number(process.env.N || 5), M = Number(process.env.M || 30)
const create = { e2b: [], native: [] }, cmd = { e2b: [], native: [] }
for (let i = 0; i < N; i++) {
  let t = performance.now()
  const s = await Sandbox.create({ timeoutMs: 120_000 })
  create.e2b.push(performance.now() - t)
  t = performance.now()
  const nat = await native('/v1/sandboxes', { timeout_s: 120 })
  create.native.push(performance.now() - t)
  if (i === 0) {
    for (let j = 0; j < M; j++) {
      t = performance.now(); await s.commands.run('true'); cmd.e2b.push(performance.now() - t)
      t = performance.now(); await native(`/v1/sandboxes/${nat.id}/process/exec`, { argv: ['/bin/bash', '-l', '-c', 'true'] }); cmd.native.push(performance.now() - t)
    }
  }
  await s.kill()
  await native('/v1/sandboxes/' + nat.id, undefined, 'DELETE')
}
console.log(JSON.stringify({ create_p50_ms: { e2b: p50(create.e2b), native: p50(create.native) },
  command_p50_ms: { e2b: p50(cmd.e2b), native: p50(cmd.native) }, n_create: N, n_command: M }))
