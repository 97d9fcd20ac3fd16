// OpenSandbox's networkPolicy through the official
// @alibaba-group/opensandbox SDK, in the test's own network namespaces
// (tests/integration/test_compat_network.py, helpers in
// tests/lib/compat_net.mjs): an egress allow rule under defaultAction deny
// lets that domain through and no other name or address; deny with no
// rules reaches nothing.  Each fetch runs through the SDK's own
// commands.run.  TAP.
import { ConnectionConfig, Sandbox } from '@alibaba-group/opensandbox';
import { ALLOWED, FETCH, allowListHolds, done, nothingReached } from '../lib/compat_net.mjs';

const text = (lines) => lines.map((m) => m.text).join('');
const reach = (sbx) => async (host) =>
  text((await sbx.commands.run(`python3 -c "$FETCH" ${host} 80 3`, { envs: { FETCH } })).logs.stdout).trim();

const connectionConfig = new ConnectionConfig({ domain: process.env.OSB_DOMAIN, apiKey: process.env.DESKBOX_TOKEN, protocol: 'http' });
const open = await Sandbox.create({
  connectionConfig, image: 'default',
  networkPolicy: { defaultAction: 'deny', egress: [{ action: 'allow', target: ALLOWED }] },
});
await allowListHolds(open.id, 'an egress allow rule', reach(open));
await open.kill();
const closed = await Sandbox.create({ connectionConfig, image: 'default', networkPolicy: { defaultAction: 'deny', egress: [] } });
await nothingReached(closed.id, 'deny with no rules', reach(closed));
await closed.kill();
done();
