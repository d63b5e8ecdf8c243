"""How fast each forwarder carries frames through the guest, with the
tap rig of the guest tests: two taps in a private network namespace,
a burst sent on one and counted on the other (:mod:`frames`).

    python -m nova_rdt.lab.guest.rate [--forwarder testpmd kernel]
        [--count 5000] [--size 64] [--vcpus 2] [--accel tcg]

Prints one JSON line per forwarder and direction.  A figure to compare
forwarders by on this machine, in the same run; not a test (speed is
never asserted in unit tests).  Needs root and QEMU; cleans up its
namespace and guests whatever happens.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

from nova_rdt.lab.guest import boot
from nova_rdt.lab.guest import image as guest_image

FORWARDERS = ("testpmd", "kernel")


def _ns(netns: str, *argv: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", netns, *argv],
                          capture_output=True, text=True, **kw)


def burst(netns: str, send: str, recv: str, count: int, size: int,
          warmup: float = 10.0, wait: float = 5.0) -> dict:
    """One :mod:`frames` run inside ``netns`` (a subprocess: raw
    sockets belong to the namespace they are opened in)."""
    r = _ns(netns, sys.executable, "-m", "nova_rdt.lab.guest.frames",
            "--send", send, "--recv", recv, "--count", str(count),
            "--size", str(size), "--warmup", str(warmup),
            "--wait", str(wait), timeout=120)
    if r.returncode != 0:
        raise boot.GuestError(f"frames {send}->{recv}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def measure(img: guest_image.GuestImage, accel: str, forwarder: str,
            count: int, size: int, vcpus: int, workdir: str,
            memory_mib: int = 512) -> list[dict]:
    netns = "nrr" + uuid.uuid4().hex[:8]
    taps = (netns + "a", netns + "b")
    subprocess.run(["ip", "netns", "add", netns], check=True)
    try:
        with boot.QemuGuest(img, accel, "forward", workdir, taps=taps,
                            netns=netns, memory_mib=memory_mib,
                            extra_cmdline="nova_rdt.forwarder=" + forwarder,
                            name="rate-" + forwarder, vcpus=vcpus) as g:
            t0 = time.monotonic()
            line = g.wait_ready(240)
            ready_s = time.monotonic() - t0
            _ns(netns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
            for tap in taps:
                _ns(netns, "ip", "link", "set", tap, "up", check=True)
            out = []
            for send, recv in (taps, taps[::-1]):
                r = burst(netns, send, recv, count, size)
                out.append({
                    "forwarder": boot.forwarder_of(line), "accel": accel,
                    "vcpus": vcpus, "frame_size": size,
                    "direction": "a->b" if send == taps[0] else "b->a",
                    "ready_s": round(ready_s, 1), "sent": r["sent"],
                    "received": r["received"],
                    "offered_pps": r["offered_pps"],
                    "received_pps": r["received_pps"]})
            return out
    finally:
        subprocess.run(["ip", "netns", "del", netns], check=False)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m nova_rdt.lab.guest.rate")
    p.add_argument("--forwarder", nargs="+", choices=FORWARDERS,
                   default=list(FORWARDERS))
    p.add_argument("--count", type=int, default=5000)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--vcpus", type=int, default=2)
    p.add_argument("--accel", choices=boot.ACCELS,
                   help="default: what detect_accel finds")
    p.add_argument("--image-dir")
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        print("nova-rdt guest rate: needs root (taps, network namespaces)",
              file=sys.stderr)
        return 1
    try:
        img = guest_image.load(args.image_dir)
        accel = args.accel or boot.detect_accel(img).accel
        with tempfile.TemporaryDirectory(prefix="nova-rdt-rate-") as tmp:
            for fwd in args.forwarder:
                for row in measure(img, accel, fwd, args.count, args.size,
                                   args.vcpus, tmp):
                    print(json.dumps(row), flush=True)
    except (guest_image.ImageError, boot.GuestError) as e:
        print(f"nova-rdt guest rate: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
