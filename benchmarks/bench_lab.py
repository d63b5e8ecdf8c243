"""What the Host lab costs: start-up and teardown, step by step.

    .venv/bin/python -m benchmarks.bench_lab [--repeat 3]

Starts and stops a whole lab (emulated Gold 6252, libvirtd, OVS-DPDK with
a PMD, two veth ports, testpmd behind vhost-user) ``--repeat`` times, the
first with an empty libvirt capability cache (cold: QEMU is probed) and
the rest sharing one (warm: as tests in one session do).  Each run also
starts and destroys one cachetune'd guest, as the peer figure: the
harness' own cost against a domain start in the same run.  Prints the
median per step.  Needs root, FUSE, libvirt, QEMU and OVS-DPDK.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time

from nova_rdt.lab import Lab
from nova_rdt.lab import diskless_domain_xml

STEPS = ("emulator", "namespace", "libvirtd", "ovs", "traffic ports",
         "vnf0", "start",
         "guest start", "guest destroy", "teardown")


def one_run(cache_dir: str) -> dict[str, float]:
    lab = Lab(libvirt_cache_dir=cache_dir)
    try:
        lab.start(traffic_ports=2, vnf=True)
        with open(f"{lab.resctrl_root}/schemata", "w") as f:
            f.write("L3:0=7;1=7\n")
        lab.libvirt.define(diskless_domain_xml(
            "bench", domain_type=lab.libvirt.domain_type,
            cputune="<cachetune vcpus='0'><cache id='0' level='3' "
                    "type='both' size='3328' unit='KiB'/></cachetune>"))
        t0 = time.monotonic()
        lab.libvirt.start_domain("bench")
        lab.timings["guest start"] = time.monotonic() - t0
        t0 = time.monotonic()
        lab.libvirt.destroy("bench")
        lab.timings["guest destroy"] = time.monotonic() - t0
    finally:
        lab.stop()
    leaks = lab.leaks()
    if leaks:
        raise SystemExit(f"the lab leaked: {leaks}")
    return lab.timings


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    runs = []
    with tempfile.TemporaryDirectory(prefix="nova-rdt-bench-cache-") as c:
        for i in range(args.repeat):
            runs.append(one_run(c))
            print(f"run {i + 1}/{args.repeat}: start "
                  f"{runs[-1]['start']:.2f}s, teardown "
                  f"{runs[-1]['teardown']:.2f}s", file=sys.stderr)
    print(f"{'step':16} {'cold (s)':>9} {'warm median (s)':>16}")
    for step in STEPS:
        cold = runs[0].get(step, float("nan"))
        warm = [r[step] for r in runs[1:] if step in r]
        w = statistics.median(warm) if warm else float("nan")
        print(f"{step:16} {cold:9.3f} {w:16.3f}")
    if len(runs) > 1:
        warm_start = statistics.median(r["start"] for r in runs[1:])
        guest = statistics.median(r["guest start"] for r in runs[1:])
        print(f"ratio warm lab start / guest start: {warm_start / guest:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
