// E2B through the official `e2b` SDK: Sandbox.create, commands.run('true')
// (envd's process Start stream), kill; against the native create and an
// exec of the same argv the front-end runs (bash -l -c).  `raw` is envd's
// process Start sent by hand: one Connect envelope, the stream read to its
// end, as the SDK would without its own client-side work.
import { base, bench, native, nativeExec, sdk, token } from './common.mjs';

const msg = Buffer.from(JSON.stringify({ process: { cmd: '/bin/bash', args: ['-l', '-c', 'true'] }, stdin: false }));
const envelope = Buffer.concat([Buffer.from([0, msg.length >>> 24, (msg.length >>> 16) & 255, (msg.length >>> 8) & 255, msg.length & 255]), msg]);
async function rawStart(s) {
  const r = await fetch(base + '/e2b/process.Process/Start', {
    method: 'POST', body: envelope, headers: {
      'Content-Type': 'application/connect+json', 'Connect-Protocol-Version': '1',
      'E2b-Sandbox-Id': s.sandboxId, 'X-Access-Token': token,
    },
  });
  const body = Buffer.from(await r.arrayBuffer());
  if (r.status !== 200 || !body.includes('"exitCode"')) throw new Error('Start: ' + r.status + ' ' + body);
}

const { Sandbox } = await sdk('e2b');
await bench({
  create: () => Sandbox.create({ timeoutMs: 300_000 }),
  remove: (s) => s.kill(),
  command: (s) => s.commands.run('true'),
  raw: rawStart,
  nativeCreate: () => native('POST', '/v1/sandboxes', { timeout_s: 300, on_timeout: 'delete', metadata: { 'e2b.template': 'base' } }).then((j) => j.id),
  nativeCommand: (id) => nativeExec(id, ['/bin/bash', '-l', '-c', 'true']),
});
