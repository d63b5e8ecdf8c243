"""The exporter's state between scrapes: the latest sample and the
memory-bandwidth counters made monotonic (``RateTracker``), shared by the
metrics, the page and the notifier."""

from __future__ import annotations

import dataclasses
import threading

from nova_rdt.exporter.sample import HostSample
from nova_rdt.exporter.sample import Sampler
from nova_rdt.resctrl import monitoring

BW_EVENTS = ("mbm_total_bytes", "mbm_local_bytes")


@dataclasses.dataclass(frozen=True)
class Bandwidth:
    total_bytes: int            # monotonic, since the exporter started
    local_bytes: int
    total_rate: float | None    # bytes/s since the previous sample
    local_rate: float | None


class LiveView:
    def __init__(self, sampler: Sampler):
        self.sampler = sampler
        self._rates = monitoring.RateTracker()
        self._lock = threading.Lock()
        self.sample: HostSample | None = None
        self.bandwidth: dict[tuple[str, int], Bandwidth] = {}
        self.scrapes = 0

    def refresh(self) -> tuple[HostSample, dict[tuple[str, int], Bandwidth]]:
        """Take a sample; serialised, since counters advance per sample."""
        with self._lock:
            s = self.sampler.sample()
            bw = {}
            keys = []
            for g in s.groups:
                for r in g.readings:
                    out = {}
                    for ev in BW_EVENTS:
                        # The uuid in the key: a group name reused by another
                        # instance starts a new series, not a jump.
                        key = (g.name, g.identity.instance_uuid, r.domain, ev)
                        keys.append(key)
                        rate = self._rates.observe(key, getattr(r, ev),
                                                   s.taken_at)
                        out[ev] = (self._rates.total(key), rate)
                    bw[(g.name, r.domain)] = Bandwidth(
                        out["mbm_total_bytes"][0], out["mbm_local_bytes"][0],
                        out["mbm_total_bytes"][1], out["mbm_local_bytes"][1])
            self._rates.forget(keys)
            self.sample, self.bandwidth = s, bw
            self.scrapes += 1
            return s, bw
