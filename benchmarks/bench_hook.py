"""What the nova-rdt hook adds to a domain start, on one Host lab.

    .venv/bin/python -m benchmarks.bench_hook [--starts 10] [--back-to-back]

One lab (emulated E5-2658 v3, 4 OS ways, real OVS-DPDK with a PMD,
``pmd_cos`` on): a managed 8-way domain that shares with the PMDs is
started (``virsh start --paused``) and destroyed ``--starts`` times in
each of three variants: nova-rdt's hook installed, an empty hook (what
libvirt spends running any hook), and no hook.  Variants alternate in
rounds of about five starts, libvirtd restarted at each switch (it looks
for hooks only at start-up), so drift over the run hits all alike.
Prints the median and p90 of each and the ratio with/without.

The hook's work per start is ``started`` (record, find the vCPU group,
PMD sync with OVS discovery); ``release`` runs during destroy and is not
in the start figure.  By default each start and each destroy waits until
the hook's background job is done, as on a host where starts are not
back to back; ``--back-to-back`` measures without that wait.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

from nova_rdt.host import prep as hostprep
from nova_rdt.lab import Lab
from tests.integration import hooklab

WAY_KIB = 30720 // 20


def _hook_running() -> bool:
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"nova_rdt.hook.main" in f.read():
                    return True
        except OSError:
            continue
    return False


def _quiesce(timeout: float = 10.0) -> None:
    """Wait until no hook job from an earlier event is still working.

    Without this each start would also pay for the previous destroy's
    ``release`` job, which a real host does not do back to back.
    """
    deadline = time.monotonic() + timeout
    while _hook_running() and time.monotonic() < deadline:
        time.sleep(0.01)


def _starts(lab, xml: str, n: int, wait: bool) -> list[float]:
    lab.libvirt.define(xml)
    times = []
    for _ in range(n):
        if wait:
            _quiesce()
        t0 = time.monotonic()
        lab.libvirt.start_domain("bench")
        times.append(time.monotonic() - t0)
        if wait:
            _quiesce()
        lab.libvirt.destroy("bench")
    _quiesce()
    lab.libvirt.undefine("bench")
    return times


def _install(shim: str, text: str | None) -> None:
    if text is None:
        if os.path.exists(shim):
            os.unlink(shim)
        return
    with open(shim, "w") as f:
        f.write(text)
    os.chmod(shim, 0o755)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--starts", type=int, default=10)
    ap.add_argument("--back-to-back", action="store_true",
                    help="do not wait for the hook's background jobs "
                         "between starts (each start then also competes "
                         "with the previous destroy's release job)")
    args = ap.parse_args(argv)
    wait = not args.back_to_back
    with tempfile.TemporaryDirectory(prefix="nova-rdt-bench-") as cache:
        lab = Lab(profile="e5-2658-v3", libvirt_cache_dir=cache,
                  hook={"pmd_cos": True, "reserved_host_ways": 4})
        try:
            lab.start(traffic_ports=1)
            hostprep.prepare(hooklab.fs(lab), reserved_ways=4, pmd_ways=0)
            lab.agent().sync_pmd()
            xml = hooklab.managed_domain(lab, "bench", cache_kib=8 * WAY_KIB,
                                         pmd_share=True)
            shim = os.path.join(lab.libvirt.hooks_dir, "qemu.d", "nova-rdt")
            with open(shim) as f:
                hook_text = f.read()
            # The empty hook shows what libvirt itself spends running a
            # hook at each event, whatever the hook does.
            texts = {"with the hook": hook_text,
                     "with an empty hook": "#!/bin/sh\nexit 0\n",
                     "without": None}
            times = {label: [] for label in texts}
            # Rounds, so that drift over the run hits every variant alike.
            rounds = max(1, args.starts // 5)
            for r in range(rounds):
                n = args.starts // rounds + (r < args.starts % rounds)
                for label, text in texts.items():
                    _install(shim, text)
                    lab.restart_libvirt()
                    _starts(lab, xml, 1, wait)   # warm-up
                    times[label] += _starts(lab, xml, n, wait)
                    if text == hook_text:
                        pmd = hooklab.schemata(lab, "nova-rdt-pmd").get(
                            "L3", 0)
            errors = hooklab.hook_errors(lab)
        finally:
            lab.stop()
    w = statistics.median(times["with the hook"])
    wo = statistics.median(times["without"])
    mode = "back to back" if not wait else "hook idle before each"
    print(f"starts: {args.starts} each (median), {mode}, PMD mask after "
          f"the last hooked destroy: {pmd:#x}, hook errors: {len(errors)}")
    print(f"{'virsh start --paused':24} {'median ms':>10} {'p90 ms':>8}")
    for label, xs in times.items():
        p90 = sorted(xs)[int(0.9 * (len(xs) - 1))]
        print(f"{label:24} {statistics.median(xs) * 1000:10.1f} "
              f"{p90 * 1000:8.1f}")
    print(f"added by the hook: {(w - wo) * 1000:.1f} ms, ratio "
          f"{w / wo:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
