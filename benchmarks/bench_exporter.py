"""Exporter scrape time against plain reads of the same files.

    .venv/bin/python -m benchmarks.bench_exporter [--scrapes 100]

An emulated Gold 6252 (2 cache ids, CMT and MBM) with 60 groups: 7
control groups (every CLOS but the root's: MBA leaves 8) and 53 monitor
groups of the root (where libvirt puts monitor-only instances).  Times,
interleaved,
``--scrapes`` HTTP GETs of ``/metrics`` (read, resolve, render, serve)
and as many passes of two loops over exactly the files a scrape reads
(per group ``schemata`` for control groups, ``tasks`` and
``mon_data/mon_L3_*/{llc_occupancy,mbm_total_bytes,mbm_local_bytes}``):
a plain loop (``open().read()``, listing ``mon_data``), and the least any
reader can do (one ``read(2)`` per file, no listing).  Prints median and
p95 of each and the ratios of the medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import urllib.request

from nova_rdt.emulator import mount
from nova_rdt.exporter import server
from nova_rdt.exporter.live import LiveView
from nova_rdt.exporter.sample import Sampler
from nova_rdt.resctrl.groups import Resctrl

GROUPS = 60


def _groups(root: str) -> list[tuple[str, bool]]:
    """(path, is a control group) of the root, its control groups and its
    monitor groups, as a scrape lists them."""
    names = [d for d in os.listdir(root)
             if d not in ("info", "mon_groups", "mon_data")
             and os.path.isdir(os.path.join(root, d))]
    mons = os.listdir(os.path.join(root, "mon_groups"))
    groups = [(root, True)] + [(os.path.join(root, d), True) for d in names]
    return groups + [(os.path.join(root, "mon_groups", d), False)
                     for d in mons]


def plain_pass(root: str) -> int:
    """List and read what a scrape reads; returns bytes read."""
    n = 0
    groups = _groups(root)
    for path, ctrl in groups:
        files = (["schemata"] if ctrl else []) + ["tasks"]
        for name in files:
            with open(os.path.join(path, name)) as f:
                n += len(f.read())
        base = os.path.join(path, "mon_data")
        for dom in os.listdir(base):
            for ev in ("llc_occupancy", "mbm_total_bytes", "mbm_local_bytes"):
                with open(os.path.join(base, dom, ev)) as f:
                    n += len(f.read())
    return n


def lean_pass(root: str, domains) -> int:
    """The same files with one read(2) each and no mon_data listing: the
    least any reader of them can do."""
    n = 0
    groups = _groups(root)
    for path, ctrl in groups:
        files = (["schemata"] if ctrl else []) + ["tasks"]
        files += [f"mon_data/mon_L3_{d:02d}/{ev}" for d in domains
                  for ev in ("llc_occupancy", "mbm_total_bytes",
                             "mbm_local_bytes")]
        for name in files:
            fd = os.open(os.path.join(path, name), os.O_RDONLY)
            n += len(os.read(fd, 65536))
            os.close(fd)
    return n


def stats(xs):
    xs = sorted(xs)
    return statistics.median(xs), xs[int(round(0.95 * (len(xs) - 1)))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scrapes", type=int, default=100)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="nova-rdt-bench-") as tmp:
        emu = mount.Emulator("gold-6252", state_dir=tmp)
        emu.start()
        try:
            root = emu.mountpoint
            fs = Resctrl(root, sysfs_cpu=emu.sysfs_cpu)
            ctrl = fs.capabilities().usable_clos
            mon = GROUPS - ctrl
            for i in range(ctrl):
                os.mkdir(os.path.join(root, f"qemu-{i}-instance-{i:08x}-"
                                            f"vcpus_0"))
            for i in range(mon):
                os.mkdir(os.path.join(root, "mon_groups",
                                      f"qemu-{100 + i}-instance-{i:08x}m-"
                                      f"vcpus_0"))
            httpd = server.serve(server.App(LiveView(Sampler(fs)), "bench"),
                                 "127.0.0.1", 0)
            url = f"http://127.0.0.1:{httpd.server_address[1]}/metrics"
            domains = sorted(fs.capabilities().cache["L3"].domains)
            scrape, plain, lean = [], [], []
            size = 0
            for i in range(args.scrapes + 3):
                t0 = time.perf_counter()
                with urllib.request.urlopen(url, timeout=30) as r:
                    size = len(r.read())
                t1 = time.perf_counter()
                plain_pass(root)
                t2 = time.perf_counter()
                lean_pass(root, domains)
                t3 = time.perf_counter()
                if i >= 3:                 # warm-up: caps, page cache
                    scrape.append(t1 - t0)
                    plain.append(t2 - t1)
                    lean.append(t3 - t2)
            httpd.shutdown()
        finally:
            emu.stop()
    (sm, sp), (pm, pp), (lm, lp) = stats(scrape), stats(plain), stats(lean)
    print(f"{ctrl} control + {mon} monitor groups, 2 cache ids, "
          f"{args.scrapes} scrapes, exposition {size} bytes")
    print(f"{'':28} {'median ms':>10} {'p95 ms':>8}")
    print(f"{'GET /metrics':28} {sm * 1000:10.2f} {sp * 1000:8.2f}")
    print(f"{'plain loop, same files':28} {pm * 1000:10.2f} {pp * 1000:8.2f}")
    print(f"{'one read(2) per file':28} {lm * 1000:10.2f} {lp * 1000:8.2f}")
    print(f"ratio (median) to the plain loop: {sm / pm:.2f}, to one read(2) "
          f"per file: {sm / lm:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
