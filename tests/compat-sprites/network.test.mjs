// Sprites' network policy through the official @fly/sprites SDK, in the
// test's own network namespaces (tests/integration/test_compat_network.py,
// helpers in tests/lib/compat_net.mjs): updateNetworkPolicy with an allow
// rule, on the running sprite, lets that domain through and no other name
// or address; then no rules reaches nothing.  Each fetch runs through the
// SDK's own execFile.  TAP.
import { SpritesClient } from '@fly/sprites';
import { ALLOWED, FETCH, allowListHolds, done, nothingReached, ok } from '../lib/compat_net.mjs';

const client = new SpritesClient(process.env.DESKBOX_TOKEN, { baseURL: process.env.SPRITES_BASE_URL });
const sp = await client.createSprite('net-sprite');
const reach = async (host) => (await sp.execFile('python3', ['-c', FETCH, host, '80', '3'])).stdout.trim();
await sp.updateNetworkPolicy({ rules: [{ domain: ALLOWED, action: 'allow' }] });
const got = await sp.getNetworkPolicy();
ok(got.rules.length === 1 && got.rules[0].domain === ALLOWED, 'getNetworkPolicy reads the rule back', got);
await allowListHolds('net-sprite', 'an allow rule', reach);
await sp.updateNetworkPolicy({ rules: [] });
await nothingReached('net-sprite', 'no rules', reach);
await sp.delete();
done();
