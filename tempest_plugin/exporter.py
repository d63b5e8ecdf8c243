"""The RDT compute's nova-rdt exporter, read by the whitebox tests.

``/api/layout`` (the way map: each cache's ways and their owners, the
CLOS in use, each group's kind and instance) and ``/metrics`` (each
group's ways per cache and MB per node) say what resctrl holds, with no
SSH to the compute.
"""

from __future__ import annotations

import json
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


class Exporter:
    def __init__(self, url: str, timeout: float = 10.0):
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _get(self, path: str) -> bytes:
        with urllib.request.urlopen(self.url + path,
                                    timeout=self.timeout) as r:
            return r.read()

    def layout(self) -> dict:
        return json.loads(self._get("/api/layout"))

    def samples(self, name: str) -> list:
        """Every sample of metric ``name`` (the family name without a
        _total suffix), as prometheus_client parses them."""
        text = self._get("/metrics").decode()
        return [s for fam in text_string_to_metric_families(text)
                for s in fam.samples if s.name == name]

    def feature(self, feature: str) -> bool:
        return any(s.value == 1 for s in self.samples(
            "nova_rdt_feature_available")
            if s.labels.get("feature") == feature)

    def clos_used(self) -> int:
        return int(self.layout()["clos"]["used"])

    def total_ways(self) -> int:
        return max(c["ways"] for c in self.layout()["caches"])

    def instance_ways(self, uuid: str) -> dict[str, int]:
        """cache id -> L3 ways of the instance's own group."""
        return {s.labels["cache_id"]: int(s.value)
                for s in self.samples("nova_rdt_group_l3_ways")
                if s.labels.get("instance_uuid") == uuid}

    def instance_mb(self, uuid: str) -> dict[str, float]:
        """node -> the MB throttle (fraction) of the instance's group."""
        return {s.labels["node"]: s.value
                for s in self.samples("nova_rdt_group_mb_ratio")
                if s.labels.get("instance_uuid") == uuid}

    def wait_for(self, what, check, timeout: float = 60.0,
                 interval: float = 1.0):
        """``check()`` until truthy; its last value either way."""
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value or time.monotonic() > deadline:
                return value
            time.sleep(interval)
