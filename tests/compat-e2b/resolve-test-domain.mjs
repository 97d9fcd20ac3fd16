// Test-only: loaded with `node --import` by tests/integration/test_compat_e2b.py,
// so that the host names {port}-{id}.$E2B_TEST_DOMAIN that the E2B SDK builds
// (deskboxd's --ports-domain) resolve to 127.0.0.1 in this process alone: no
// /etc/hosts entry, no DNS query leaves the machine.  The SDK itself is unchanged.
import dns from 'node:dns'

const domain = (process.env.E2B_TEST_DOMAIN || '').toLowerCase()
const lookup = dns.lookup
dns.lookup = function (host, opts, cb) {
  if (typeof opts === 'function') { cb = opts; opts = {} }
  const h = String(host).toLowerCase()
  if (domain && (h === domain || h.endsWith('.' + domain))) {
    const all = typeof opts === 'object' && opts && opts.all
    return process.nextTick(() => all ? cb(null, [{ address: '127.0.0.1', family: 4 }]) : cb(null, '127.0.0.1', 4))
  }
  return lookup.call(this, host, opts, cb)
}
