// Daytona's network settings through the official @daytonaio/sdk, in the
// test's own network namespaces (tests/integration/test_compat_network.py,
// helpers in tests/lib/compat_net.mjs): domainAllowList lets the listed name
// through and no other name or address; networkBlockAll reaches nothing.
// Each fetch runs through the SDK's own process.executeCommand.  TAP.
import { Daytona } from '@daytonaio/sdk';
import { ALLOWED, FETCH, allowListHolds, done, nothingReached } from '../lib/compat_net.mjs';

const reach = (sb) => async (host) =>
  (await sb.process.executeCommand(`python3 -c "$FETCH" ${host} 80 3`, undefined, { FETCH })).result.trim();

const daytona = new Daytona();
const sb = await daytona.create({ domainAllowList: ALLOWED });
await allowListHolds(sb.id, 'domainAllowList', reach(sb));
await sb.delete();
const blocked = await daytona.create({ networkBlockAll: true });
await nothingReached(blocked.id, 'networkBlockAll', reach(blocked));
await blocked.delete();
done();
