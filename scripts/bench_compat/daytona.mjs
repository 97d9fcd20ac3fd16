// Daytona through the official @daytonaio/sdk: daytona.create,
// process.executeCommand('true'), delete; against the native create and an
// exec of the same argv the front-end runs (stderr into stdout, sh -c).
import { bench, native, nativeExec, sdk } from './common.mjs';

const { Daytona } = await sdk('@daytonaio/sdk');
const daytona = new Daytona();
await bench({
  create: () => daytona.create(),
  remove: (s) => s.delete(),
  command: (s) => s.process.executeCommand('true'),
  nativeCreate: () => native('POST', '/v1/sandboxes', { metadata: { 'code-toolbox-language': 'python' } }).then((j) => j.id),
  nativeCommand: (id) => nativeExec(id, ['/bin/sh', '-c', 'exec 2>&1; exec "$@"', 'sh', '/bin/sh', '-c', 'true']),
});
