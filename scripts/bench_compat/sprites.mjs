// Sprites through the official @fly/sprites SDK: createSprite,
// execFile('true') (the exec WebSocket), delete; against the native create
// of a named sandbox and an exec of the same argv.
import { bench, native, nativeExec, sdk } from './common.mjs';

const { SpritesClient } = await sdk('@fly/sprites');
const client = new SpritesClient(process.env.DESKBOX_TOKEN, { baseURL: process.env.SPRITES_BASE_URL });
await bench({
  create: (i) => client.createSprite('bench-sp-' + i),
  remove: (s) => s.delete(),
  command: (s) => s.execFile('true', []),
  nativeCreate: (i) => native('POST', '/v1/sandboxes', { name: 'bench-nat-' + i }).then((j) => j.id),
  nativeCommand: (id) => nativeExec(id, ['true']),
});
