"""A server's resctrl group counters, as nova-rdt's exporter serves them.

The isolation lab runs the real exporter (``nova-rdt exporter``, the
same subprocess the demo lab runs) on its resctrl mount and reads a
group's series from ``/metrics`` over HTTP, as Prometheus would: what the
report shows is what an operator's dashboard would have shown.
"""

from __future__ import annotations

import urllib.error
import urllib.request

from prometheus_client import parser as prom_parser

from nova_rdt import exception

#: load() keys -> the exporter's metric families (summed over nodes and
#: cache ids: the group's whole activity).
METRICS = {
    "mbm_total_bytes": "nova_rdt_memory_bandwidth_bytes",
    "mbm_local_bytes": "nova_rdt_memory_bandwidth_local_bytes",
    "llc_occupancy_bytes": "nova_rdt_llc_occupancy_bytes",
}
KEYS = ("rdt_group",) + tuple(METRICS)
SCRAPE_TIMEOUT = 10.0


class CountersError(exception.NovaRdtError, RuntimeError):
    pass


def none_values() -> dict:
    """What a server without a group reports: every key, None-valued."""
    return dict.fromkeys(KEYS)


def of_group(metrics_text: str, group: str) -> dict:
    """The counters of control group ``group`` in an exposition text:
    ``{rdt_group, mbm_total_bytes, mbm_local_bytes, llc_occupancy_bytes}``;
    a metric the exporter has no sample of for the group is None (not 0:
    an unreadable counter is a gap, not idleness)."""
    out = none_values()
    out["rdt_group"] = group
    wanted = {family: key for key, family in METRICS.items()}
    try:
        families = list(prom_parser.text_string_to_metric_families(
            metrics_text))
    except ValueError as e:
        raise CountersError(f"the exporter's /metrics does not parse: "
                            f"{e}") from None
    for fam in families:
        key = wanted.get(fam.name)
        if key is None:
            continue
        for s in fam.samples:
            if s.labels.get("group") != group or s.name.endswith(
                    ("_created", "_gsum", "_gcount")):
                continue
            out[key] = (out[key] or 0) + int(s.value)
    return out


def scrape(url: str, timeout: float = SCRAPE_TIMEOUT) -> str:
    try:
        with urllib.request.urlopen(url + "/metrics", timeout=timeout) as r:
            return r.read().decode()
    except (OSError, urllib.error.URLError) as e:
        raise CountersError(f"cannot scrape the exporter at {url}/metrics: "
                            f"{e}") from None
