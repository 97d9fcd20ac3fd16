// OpenSandbox through the official @alibaba-group/opensandbox SDK:
// Sandbox.create({image}), commands.run('true') (execd's event stream),
// kill; against the native create and an exec of the same argv the
// front-end runs (bash -c behind sh).
import { bench, native, nativeExec, sdk } from './common.mjs';

const { ConnectionConfig, Sandbox } = await sdk('@alibaba-group/opensandbox');
const connectionConfig = new ConnectionConfig({ domain: process.env.OSB_DOMAIN, apiKey: process.env.DESKBOX_TOKEN, protocol: 'http' });
await bench({
  create: () => Sandbox.create({ connectionConfig, image: 'default', timeoutSeconds: 600 }),
  remove: (s) => s.kill(),
  command: (s) => s.commands.run('true'),
  // The SDK always asks for resourceLimits {cpu: "1", memory: "2Gi"}.
  nativeCreate: () => native('POST', '/v1/sandboxes', { timeout_s: 600, on_timeout: 'delete', cpu_millis: 1000, memory_mb: 2048 }).then((j) => j.id),
  nativeCommand: (id) => nativeExec(id, ['/bin/sh', '-c',
    'command -v bash >/dev/null && exec bash --noprofile --norc -c "$0" || exec sh -c "$0"', 'true']),
});
