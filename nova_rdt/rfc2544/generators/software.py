"""The software generator: real frames through a real forwarder.

Each trial runs :mod:`.swworker` inside the network namespace that holds
both ends of the path (``ip netns exec``), so the sender, the receiver
and the interface counters all see that namespace.  On the Host lab the
path is veth → OVS-DPDK (``net_af_packet`` ports, PMD threads) → veth.

Python's AF_PACKET sender tops out at a few hundred kpps here, so
``max_rate_pps`` is a ceiling to configure (or to measure with a
calibration run over a direct veth pair): a result at that ceiling is
flagged generator-limited.
"""

from __future__ import annotations

import json
import subprocess
import sys

from nova_rdt.rfc2544 import latency as latency_mod
from nova_rdt.rfc2544.model import LatencyResult
from nova_rdt.rfc2544.model import TrafficGenerator
from nova_rdt.rfc2544.model import Trial

# Below this share of the offered rate, the sender could not keep up.
ACHIEVED_FLOOR = 0.98


class GeneratorError(RuntimeError):
    pass


class SoftwareGenerator(TrafficGenerator):
    name = "software"

    def __init__(self, tx_interface: str, rx_interface: str,
                 netns: str | None = None, max_rate_pps: float = 300_000,
                 dst_mac: str | None = None, probe_rate_pps: float = 1000,
                 python: str = sys.executable, timeout_margin: float = 30):
        if max_rate_pps <= 0:
            raise ValueError("max_rate_pps must be positive")
        self.tx, self.rx, self.netns = tx_interface, rx_interface, netns
        self.max_rate = float(max_rate_pps)
        self.dst_mac = dst_mac
        self.probe_rate = probe_rate_pps
        self.python = python
        self.timeout_margin = timeout_margin

    def max_rate_pps(self, frame_size: int) -> float:
        return self.max_rate

    def _worker(self, frame_size, rate, duration, probe_rate=0.0) -> dict:
        argv = [self.python, "-m", "nova_rdt.rfc2544.generators.swworker",
                "--tx", self.tx, "--rx", self.rx,
                "--frame-size", str(frame_size), "--rate", f"{rate:.3f}",
                "--duration", str(duration)]
        if probe_rate:
            argv += ["--probe-rate", str(probe_rate)]
        if self.dst_mac:
            argv += ["--dst-mac", self.dst_mac]
        if self.netns:
            argv = ["ip", "netns", "exec", self.netns, *argv]
        res = subprocess.run(argv, capture_output=True, text=True,
                             timeout=duration + self.timeout_margin)
        if res.returncode != 0:
            raise GeneratorError(f"software generator failed: "
                                 f"{res.stderr.strip()[-800:]}")
        return json.loads(res.stdout)

    def trial(self, frame_size: int, rate_pps: float,
              duration: float) -> Trial:
        r = self._worker(frame_size, rate_pps, duration)
        t = Trial(rate_pps, r["duration"], r["tx"], min(r["rx"], r["tx"]))
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
