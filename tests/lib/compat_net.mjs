// What the compat front-ends' network scripts share
// (tests/compat-<engine>/network.test.mjs, run by
// tests/integration/test_compat_network.py in the test's own network
// namespaces): TAP output, deskbox's own view of a sandbox, and the three
// reachability checks of an allow list.  Env: DESKBOX_URL, DESKBOX_TOKEN,
// ALLOWED / DENIED (names), DENIED_ADDR, FETCH (python: prints OK ... when
// it reached the host).
const { DESKBOX_URL: base, DESKBOX_TOKEN: token } = process.env;
export const { ALLOWED, DENIED, DENIED_ADDR, FETCH } = process.env;

let n = 0;
export function ok(cond, name, detail) {
  n++;
  console.log(`${cond ? 'ok' : 'not ok'} ${n} - ${name}`);
  if (!cond && detail !== undefined) console.log('# ' + JSON.stringify(detail).slice(0, 600));
}
export const done = () => console.log(`1..${n}`);

export async function view(id) {
  const r = await fetch(`${base}/v1/sandboxes/${id}`, { headers: { Authorization: 'Bearer ' + token } });
  return r.json();
}

// `reach(host)` runs FETCH in the sandbox through the engine's SDK and
// returns its line.  `what` names the setting that allows ALLOWED.
export async function allowListHolds(id, what, reach) {
  const v = await view(id);
  ok(JSON.stringify(v.network) === JSON.stringify({ allow: [ALLOWED] }), `${what} is the sandbox's allow list`, v.network);
  let out = await reach(ALLOWED);
  ok(out.startsWith('OK hello from'), `${what}: the allowed name is reached`, out);
  out = await reach(DENIED);
  ok(!out.startsWith('OK'), `${what}: another name is unreachable`, out);
  out = await reach(DENIED_ADDR);
  ok(!out.startsWith('OK'), `${what}: another address is unreachable`, out);
}

// The sandbox has no network: ALLOWED is unreachable too.
export async function nothingReached(id, what, reach) {
  const v = await view(id);
  ok(v.network === 'none', `${what} is network none`, v.network);
  const out = await reach(ALLOWED);
  ok(!out.startsWith('OK'), `${what}: not even the name allowed elsewhere is reached`, out);
}
