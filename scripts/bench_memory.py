"""make bench, memory (issue 15): what an idle desktop costs, alone and with
20 running (8 with BENCH_QUICK=1), as PSS: its processes (found by its
cgroup) plus its own bridge, not the warm pool's.  Also the same split by
process (Xvfb, openbox, deskbox-vnc, the init, the bridge), each figure
per sandbox, so a change shows where it saved.  `BENCH_ONLY=memory make
bench` runs only this part."""
import collections
import concurrent.futures
import time


def rollup(pid):
    """/proc/PID/smaps_rollup's kB fields (Pss, Pss_Anon, Pss_File, ...)."""
    out = {}
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                p = line.split()
                if len(p) >= 2 and p[0].endswith(":") and p[1].isdigit():
                    out[p[0][:-1]] = int(p[1])
    except OSError:
        pass
    return out


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return "?"


def by_process(srv, sids, sandbox_pids, own_bridges):
    """{process name: Counter of smaps_rollup kB summed over `sids`}, and
    how many of each."""
    agg = collections.defaultdict(collections.Counter)
    count = collections.Counter()
    for sid in sids:
        pids = sandbox_pids("dbx-" + sid)
        for p in pids + own_bridges(srv, pids):
            name = comm(p)
            count[name] += 1
            agg[name].update(rollup(p))
    return agg, count


def print_table(agg, count, n):
    keys = ["Pss", "Pss_Anon", "Pss_File", "Pss_Shmem"]
    print("  %-16s %4s  " % ("process", "n") + " ".join("%9s" % k for k in keys) +
          "   (MB per sandbox)")
    for name in sorted(agg, key=lambda c: -agg[c]["Pss"]):
        print("  %-16s %4d  " % (name, count[name]) +
              " ".join("%9.2f" % (agg[name][k] / 1024.0 / n) for k in keys))


def measure(srv, sids, label, report, idle_cost, sandbox_pids, own_bridges, target=None):
    pss, cpu = idle_cost(srv, sids)
    report("idle sandbox PSS (%s)" % label, [pss], unit="MB", target=target)
    agg, count = by_process(srv, sids, sandbox_pids, own_bridges)
    print_table(agg, count, len(sids))
    for name in sorted(agg, key=lambda c: -agg[c]["Pss"]):
        report("  PSS of %s (%s)" % (name, label), [agg[name]["Pss"] / 1024.0 / len(sids)],
               unit="MB")
    return cpu


def run(srv, report, idle_cost, sandbox_pids, own_bridges, quick):
    """Returns the ids of the sandboxes it leaves running (the 20)."""
    one = srv.create({})["id"]
    time.sleep(2.0)
    cpu = measure(srv, [one], "1 running", report, idle_cost, sandbox_pids, own_bridges,
                  target="<= 40 MB")
    report("idle sandbox CPU (1 running)", [cpu], unit="%", target="<= 0.5 %")
    many = [one]
    count = 8 if quick else 20
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        many += [s["id"] for s in ex.map(lambda _: srv.create({}), range(count - 1))]
    time.sleep(3.0)
    cpu = measure(srv, many, "%d running" % count, report, idle_cost, sandbox_pids,
                  own_bridges, target="<= 20 MB" if count == 20 else None)
    report("idle sandbox CPU (%d running)" % count, [cpu], unit="%")
    return many
