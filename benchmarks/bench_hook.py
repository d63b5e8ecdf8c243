"""What the nova-rdt hook adds to a domain start, on one Host lab.

    .venv/bin/python -m benchmarks.bench_hook [--starts 10]

One lab (emulated E5-2658 v3, 4 OS ways, real OVS-DPDK with a PMD,
``pmd_cos`` on): a managed 8-way domain that shares with the PMDs is
started (``virsh start --paused``) and destroyed ``--starts`` times with
the hook installed, then as many times after the hook is removed and
libvirtd restarted (it looks for hooks only at start-up).  Prints the
median start time of each and the ratio.  The hook's work per start:
``started`` (record, find the vCPU group, PMD sync with OVS discovery);
``release`` runs during destroy and is not in the start figure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

from nova_rdt import hostprep
from nova_rdt.lab import Lab
from tests.integration import hooklab

WAY_KIB = 30720 // 20


def _starts(lab, xml: str, n: int) -> list[float]:
    lab.libvirt.define(xml)
    times = []
    for _ in range(n):
        t0 = time.monotonic()
        lab.libvirt.start_domain("bench")
        times.append(time.monotonic() - t0)
        lab.libvirt.destroy("bench")
    lab.libvirt.undefine("bench")
    return times


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--starts", type=int, default=10)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="nova-rdt-bench-") as cache:
        lab = Lab(profile="e5-2658-v3", libvirt_cache_dir=cache,
                  hook={"pmd_cos": True, "reserved_host_ways": 4})
        try:
            lab.start(traffic_ports=1)
            hostprep.prepare(hooklab.fs(lab), reserved_ways=4, pmd_ways=0)
            lab.agent().sync_pmd()
            xml = hooklab.managed_domain(lab, "bench", cache_kib=8 * WAY_KIB,
                                         pmd_share=True)
            _starts(lab, xml, 1)   # warm-up
            with_hook = _starts(lab, xml, args.starts)
            pmd = hooklab.schemata(lab, "nova-rdt-pmd").get("L3", 0)
            os.unlink(os.path.join(lab.libvirt.hooks_dir, "qemu.d",
                                   "nova-rdt"))
            lab.restart_libvirt()
            _starts(lab, xml, 1)
            without = _starts(lab, xml, args.starts)
            errors = hooklab.hook_errors(lab)
        finally:
            lab.stop()
    w, wo = statistics.median(with_hook), statistics.median(without)
    print(f"starts: {args.starts} each (median), PMD mask after the last "
          f"hooked destroy: {pmd:#x}, hook errors: {len(errors)}")
    print(f"{'virsh start --paused':24} {'median ms':>10} {'p90 ms':>8}")
    for label, xs in (("with the hook", with_hook), ("without", without)):
        p90 = sorted(xs)[int(0.9 * (len(xs) - 1))]
        print(f"{label:24} {statistics.median(xs) * 1000:10.1f} "
              f"{p90 * 1000:8.1f}")
    print(f"added by the hook: {(w - wo) * 1000:.1f} ms, ratio "
          f"{w / wo:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
