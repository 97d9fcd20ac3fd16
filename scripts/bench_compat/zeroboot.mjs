// Zeroboot has no SDK but its REST shape: POST /zeroboot/v1/exec {"code"}
// with a bearer key runs the code in a fresh sandbox deleted afterwards.
// Its create is inside that one call, so only the round trip is timed,
// against the same done natively: create, code_run, delete.
import { bench, native } from './common.mjs';

await bench({
  create: null,
  command: () => native('POST', '/zeroboot/v1/exec', { code: 'print(1)' }),
  nativeCommand: async () => {
    const { id } = await native('POST', '/v1/sandboxes', {});
    await native('POST', `/v1/sandboxes/${id}/process/code_run`, { code: 'print(1)', language: 'python' });
    await native('DELETE', '/v1/sandboxes/' + id);
  },
});
