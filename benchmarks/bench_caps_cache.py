"""A spawn's claim, make_room and enforce with the capabilities read
once per mount, against reading them at every walk (as before).

    .venv/bin/python -m benchmarks.bench_caps_cache [--cycles 60]
        [--profile gold-6252]

One emulated host (``--profile``; gold-6252: 2 cache ids of 11 ways, 96
CPUs in sysfs), 2 host ways reserved, 4 running neighbours of 1 way in
libvirt's groups.  A cycle is what nova-compute does for one spawn with
3 ways on each cache id: :meth:`Placer.claim`, :meth:`Placer.make_room`,
libvirt's group made (not timed), :meth:`Placer.enforce`; then the
group is removed and the reservation released (not timed).  Two
variants on the same mount, alternating in rounds of five cycles so
drift hits both alike:

* ``cached``: :class:`Resctrl` as it is (capcache, one discovery per
  mount);
* ``per-walk``: a Resctrl whose ``capabilities()`` calls
  :func:`capabilities.discover` each time, as every walk did before;
* ``no-tasks``: cached, and the placer's walks read no ``tasks`` file
  (``HostView.collect(fs, tasks=False)``; the root's lists every thread
  on the host, and planning never uses the counts).

Prints per variant the median and p90 of a cycle (ms), the discoveries
and the walks per cycle, and the ratios of the medians to ``cached``'s:
the figures to compare between runs, not the absolute times.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

from nova_rdt.emulator import mount
from nova_rdt.host import prep
from nova_rdt.resctrl import capabilities as caps_mod
from nova_rdt.resctrl import capcache
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.resctrl.hostview import HostView
from nova_rdt.virt import placer as placer_mod

PREFIX = "nova-rdt-"
ROUND = 5
NEIGHBOURS = (0x004, 0x008, 0x010, 0x020)


class PerWalk(Resctrl):
    """Capabilities discovered at every call, as before the cache."""

    def capabilities(self, fresh: bool = False) -> caps_mod.Capabilities:
        return caps_mod.discover(self.root, self.sysfs_cpu)


class Counted:
    """Counts discover() and group walks while installed."""

    def __init__(self):
        self.discoveries = self.walks = 0
        self._discover, self._groups = caps_mod.discover, Resctrl.groups

    def __enter__(self):
        outer = self

        def discover(*a, **kw):
            outer.discoveries += 1
            return outer._discover(*a, **kw)

        def groups(self, *a, **kw):
            outer.walks += 1
            return outer._groups(self, *a, **kw)

        caps_mod.discover = discover
        Resctrl.groups = groups
        return self

    def __exit__(self, *exc):
        caps_mod.discover, Resctrl.groups = self._discover, self._groups


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def cycle(fs: Resctrl, placer: placer_mod.Placer, n: int) -> float:
    """One spawn; returns the seconds of claim + make_room + enforce."""
    uuid, domain = f"u{n}", f"instance-{n:08x}"
    group = os.path.join(fs.root, f"qemu-{n}-{domain}-vcpus_0")
    t0 = time.perf_counter()
    placer.claim(uuid, domain, {"L3": {0: 3, 1: 3}})
    placer.make_room(uuid)
    t1 = time.perf_counter()
    os.mkdir(group)                        # libvirt's allocation
    _write(os.path.join(group, "schemata"), "L3:0=700;1=700\n")
    t2 = time.perf_counter()
    if placer.enforce(uuid) is None:
        raise RuntimeError(f"enforce wrote no group for {uuid}")
    t3 = time.perf_counter()
    os.rmdir(group)
    placer.release(uuid)
    return (t1 - t0) + (t3 - t2)


def stats(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    return statistics.median(xs), xs[int(round(0.9 * (len(xs) - 1)))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=60,
                    help="cycles per variant (default 60)")
    ap.add_argument("--profile", default="gold-6252")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="nova-rdt-bench-") as tmp:
        emu = mount.Emulator(args.profile, state_dir=tmp)
        emu.start()
        try:
            root = emu.mountpoint
            variants = {
                "cached": Resctrl(root, prefix=PREFIX,
                                  sysfs_cpu=emu.sysfs_cpu),
                "per-walk": PerWalk(root, prefix=PREFIX,
                                    sysfs_cpu=emu.sysfs_cpu)}
            variants["no-tasks"] = variants["cached"]
            collect = {"no-tasks": lambda fs: HostView.collect(
                fs, tasks=False)}
            prep.prepare(variants["cached"], 2, 0)
            for i, mask in enumerate(NEIGHBOURS):
                d = os.path.join(root, f"qemu-{900 + i}-instance-"
                                       f"{900 + i:08x}-vcpus_0")
                os.mkdir(d)
                _write(os.path.join(d, "schemata"),
                       f"L3:0={mask:x};1={mask:x}\n")
            placers = {k: placer_mod.Placer(
                fs, {}, 2, 0, pmd_cos=False,
                collect=collect.get(k, HostView.collect))
                for k, fs in variants.items()}
            times: dict[str, list[float]] = {k: [] for k in variants}
            counts = {k: Counted() for k in variants}
            n = 0
            for k in variants:             # warm-up: caps, page cache
                cycle(variants[k], placers[k], n := n + 1)
            while min(len(t) for t in times.values()) < args.cycles:
                for k, fs in variants.items():
                    with counts[k]:
                        for _ in range(ROUND):
                            times[k].append(cycle(fs, placers[k], n := n + 1))
        finally:
            emu.stop()
    print(f"{args.profile}: claim + make_room + enforce, "
          f"{len(times['cached'])} cycles per variant, 4 neighbours")
    for k, ts in times.items():
        med, p90 = stats(ts)
        c = counts[k]
        print(f"  {k:9} median {med * 1e3:7.2f} ms  p90 {p90 * 1e3:7.2f} ms"
              f"  discoveries/cycle {c.discoveries / len(ts):.2f}"
              f"  walks/cycle {c.walks / len(ts):.2f}")
    cached = stats(times["cached"])[0]
    print(f"caps-cache: profile={args.profile} per_walk_over_cached="
          f"{stats(times['per-walk'])[0] / cached:.2f} no_tasks_over_cached="
          f"{stats(times['no-tasks'])[0] / cached:.2f} "
          f"cached_entries={len(capcache.CACHE)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
