"""The software generator: real frames through a real forwarder.

Each trial runs :mod:`.swworker` inside the network namespace that holds
both ends of the path (``ip netns exec``), so the sender, the receiver
and the interface counters all see that namespace.  On the Host lab the
path is veth → OVS-DPDK (``net_af_packet`` ports, PMD threads) → veth.

The bulk frames come from the compiled sender, ``nova-rdt-pktgen``
(``tools/build-native.sh``; 2000 flows by default, both directions with
``bidirectional``), or, if it is not built, from the Python sender, which
is slow and says so (a warning, and the report's generator name).  The
search is bounded by what each trial really sent, so ``max_rate_pps`` is
only where it starts: a trial that sends less than offered is marked
generator-limited, and so is a result at the generator's real ceiling.
"""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys

from nova_rdt import exception
from nova_rdt.rfc2544 import latency as latency_mod
from nova_rdt.rfc2544.model import LatencyResult
from nova_rdt.rfc2544.model import TrafficGenerator
from nova_rdt.rfc2544.model import Trial

# Below this share of the offered rate, the sender could not keep up.
ACHIEVED_FLOOR = 0.98
LOG = logging.getLogger(__name__)


class GeneratorError(exception.NovaRdtError, RuntimeError):
    pass


def cpus_beside(busy_mask: int) -> list[int] | None:
    """The CPUs this process may use outside ``busy_mask`` (say, the
    OVS-DPDK PMD cores), for ``SoftwareGenerator(cpus=...)``: a sender on
    a PMD's core starves the very forwarder it measures.  None when no
    CPU is left (then the generator runs unpinned)."""
    free = sorted(c for c in os.sched_getaffinity(0)
                  if not busy_mask >> c & 1)
    return free or None


class SoftwareGenerator(TrafficGenerator):
    name = "software"

    def __init__(self, tx_interface: str, rx_interface: str,
                 netns: str | None = None, max_rate_pps: float = 10_000_000,
                 dst_mac: str | None = None, probe_rate_pps: float = 1000,
                 python: str = sys.executable, timeout_margin: float = 30,
                 flows: int = 2000, bidirectional: bool = False,
                 sender: str = "auto", bulk_dst_mac: str | None = None,
                 cpus=None, threads: int = 0):
        for key, value in (("max_rate_pps", max_rate_pps),
                           ("probe_rate_pps", probe_rate_pps),
                           ("timeout_margin", timeout_margin)):
            if isinstance(value, bool) or \
                    not isinstance(value, (int, float)) or \
                    not math.isfinite(value) or value <= 0:
                raise ValueError(f"{key} must be a positive number")
        if isinstance(flows, bool) or not isinstance(flows, int) or \
                not 1 <= flows <= 65536:
            raise ValueError("flows must be an integer, 1-65536")
        if sender not in ("auto", "native", "python"):
            raise ValueError("sender must be auto, native or python")
        if cpus is not None:
            try:
                cpus = None if isinstance(cpus, (str, bytes)) else \
                    sorted(set(cpus))
            except TypeError:
                cpus = None
            if not cpus or not all(isinstance(c, int) and
                                   not isinstance(c, bool) and c >= 0
                                   for c in cpus):
                raise ValueError("cpus must be a list of CPU numbers")
        if isinstance(threads, bool) or not isinstance(threads, int) or \
                not 0 <= threads <= 16:
            raise ValueError("threads must be an integer, 0-16 (0: one "
                             "per CPU it may use)")
        for key, value in (("tx_interface", tx_interface),
                           ("rx_interface", rx_interface)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"{key} must be an interface name")
        self.tx, self.rx, self.netns = tx_interface, rx_interface, netns
        self.max_rate = float(max_rate_pps)
        self.dst_mac = dst_mac
        self.bulk_dst_mac = bulk_dst_mac
        self.probe_rate = probe_rate_pps
        self.python = python
        self.timeout_margin = timeout_margin
        self.flows = flows
        self.bidirectional = bool(bidirectional)
        self.sender = sender
        self.cpus = cpus
        self.threads = threads
        self.sender_used: str | None = None

    def max_rate_pps(self, frame_size: int) -> float:
        return self.max_rate

    def _worker(self, frame_size, rate, duration, probe_rate=0.0) -> dict:
        argv = [self.python, "-m", "nova_rdt.rfc2544.generators.swworker",
                "--tx", self.tx, "--rx", self.rx,
                "--frame-size", str(frame_size), "--rate", f"{rate:.3f}",
                "--duration", str(duration), "--flows", str(self.flows),
                "--sender", self.sender]
        if probe_rate:
            argv += ["--probe-rate", str(probe_rate)]
        if self.dst_mac:
            argv += ["--dst-mac", self.dst_mac]
        if self.bulk_dst_mac:
            argv += ["--bulk-dst-mac", self.bulk_dst_mac]
        if self.bidirectional:
            argv.append("--bidirectional")
        if self.cpus:
            argv += ["--cpus", ",".join(map(str, self.cpus))]
        if self.threads:
            argv += ["--threads", str(self.threads)]
        if self.netns:
            argv = ["ip", "netns", "exec", self.netns, *argv]
        try:
            # Its own session: a terminal's Ctrl-C reaches the caller,
            # whose run() then kills the worker, not the worker first
            # (a trial that fails under an interrupt hides it).
            res = subprocess.run(argv, capture_output=True, text=True,
                                 timeout=duration + self.timeout_margin,
                                 start_new_session=True)
        except subprocess.TimeoutExpired:
            raise GeneratorError(f"software generator: no answer "
                                 f"{duration + self.timeout_margin:g} s "
                                 f"into a {duration:g} s trial") from None
        if res.returncode != 0:
            raise GeneratorError(f"software generator failed: "
                                 f"{res.stderr.strip()[-800:]}")
        out = json.loads(res.stdout)
        used = out.get("sender", "python")
        if used != self.sender_used:
            self.sender_used = used
            self.name = f"software ({used} sender)"
            if used == "python":
                LOG.warning("software generator: %s; expect a few hundred "
                            "kpps at most", out.get("sender_note", ""))
        return out

    def trial(self, frame_size: int, rate_pps: float,
              duration: float) -> Trial:
        r = self._worker(frame_size, rate_pps, duration)
        t = Trial(rate_pps, r["duration"], r["tx"], min(r["rx"], r["tx"]))
        # Sent less than asked: the generator's ceiling, not the DUT's.
        limited = t.achieved_pps < ACHIEVED_FLOOR * rate_pps
        return Trial(rate_pps, r["duration"], r["tx"], min(r["rx"], r["tx"]),
                     generator_limited=limited)

    def latency(self, frame_size, rate_pps, duration, bins_us
                ) -> LatencyResult:
        r = self._worker(frame_size, rate_pps, duration,
                         probe_rate=min(self.probe_rate, rate_pps / 2))
        return latency_mod.summarize(
            r["latencies_us"], bins_us, rate_pps, r["duration"],
            lost=max(r["probes"] - len(r["latencies_us"]), 0))
