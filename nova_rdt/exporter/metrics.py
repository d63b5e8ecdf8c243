"""Prometheus metrics from a LiveView, taken afresh at every scrape.

Every series carries ``host``: Nova's ``[DEFAULT] host`` of this compute,
so that one Prometheus scraping many computes can join the series with
Nova's host names (its own ``instance`` label is only the scrape
address).  Every per-group series also carries ``group``, ``kind``
(see ``identity``), ``instance_uuid``, ``instance_name``, ``project_id``,
``project_name`` and ``flavor`` (empty where they do not apply).  A group
is keyed by ``host`` and ``group`` (an instance by ``host`` and
``instance_uuid``): display and project names are tenants' words, never
unique, and serve only in legends.  Counts of monitor groups inside a
control group are part of that group's series (the kernel sums them), so
per-kind sums never count twice.

Names follow Prometheus's conventions (base units, ``_total`` once, no
unit in a label).  :data:`DEPRECATED` lists the names of the previous
release, still served beside the new ones for one release.
"""

from __future__ import annotations

import time

from prometheus_client.core import CounterMetricFamily
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from nova_rdt.exporter import waymap
from nova_rdt.exporter.live import LiveView
from nova_rdt.host import recovery

P = "nova_rdt_"
GROUP_LABELS = ["group", "kind", "instance_uuid", "instance_name",
                "project_id", "project_name", "flavor"]
MIB = 1 << 20
# resctrl's MB units -> bytes/s per unit (None: a fraction of the peak,
# nova_rdt_group_mb_ratio).  The kernel's MBps is its MBM bandwidth in
# MiB/s; AMD programs limits in eighths of a GiB/s.
MB_BYTES_PER_SECOND = {"percent": None, "MBps": MIB, "1/8GBps": (1 << 30) // 8}
# Served for one release beside their replacement, then removed (see
# releasenotes/notes/metric-names-*.yaml).
DEPRECATED = {
    "nova_rdt_memory_bandwidth_total_bytes_total":
        "nova_rdt_memory_bandwidth_bytes_total",
    "nova_rdt_rdt_available": "nova_rdt_resctrl_available",
    "nova_rdt_group_mb": "nova_rdt_group_mb_ratio and "
                         "nova_rdt_group_mb_bytes_per_second",
}
FEATURES = {
    "cat_l3": lambda c: "L3" in c.cache or "L3CODE" in c.cache,
    "cdp_l3": lambda c: "L3CODE" in c.cache,
    "mba": lambda c: "MB" in c.bandwidth,
    "mba_mbps": lambda c: c.mba_mbps,
    "cmt": lambda c: _has_event(c, "llc_occupancy"),
    "mbm_total": lambda c: _has_event(c, "mbm_total_bytes"),
    "mbm_local": lambda c: _has_event(c, "mbm_local_bytes"),
}


def _has_event(caps, event: str) -> bool:
    return any(event in m.features for m in caps.monitoring.values())


def with_host(fam, host: str):
    """``fam`` with ``host`` first among every sample's labels."""
    fam.samples = [smp._replace(labels={"host": host, **smp.labels})
                   for smp in fam.samples]
    return fam


def _glabels(g) -> list[str]:
    i = g.identity
    return [g.name, i.kind, i.instance_uuid, i.instance_name, i.project_id,
            i.project_name, i.flavor]


class RdtCollector(Collector):
    def __init__(self, live: LiveView, host: str | None = None):
        self.live = live
        self.host = host
        self.errors = 0
        self.unavailable = 0

    def describe(self):
        return []         # collected per scrape: never at registration

    def collect(self):
        families = self._collect()
        if not self.host:
            yield from families
            return
        for fam in families:
            yield with_host(fam, self.host)

    def _collect(self):
        t0 = time.monotonic()
        try:
            s, bw = self.live.refresh()
        except Exception:                   # never a 500 for Prometheus
            self.errors += 1
            yield from self._health(time.monotonic() - t0, None)
            return
        self.errors += s.read_errors
        self.unavailable += s.unavailable
        yield from self._availability(s)
        if s.available:
            yield from self._groups(s, bw)
            yield from self._caches(s)
        yield from self._health(time.monotonic() - t0, s)

    def _availability(self, s):
        for name, text in (("resctrl_available", ""),
                           ("rdt_available", "Deprecated: use "
                                             "nova_rdt_resctrl_available. ")):
            rdt = GaugeMetricFamily(
                P + name, text + "1 if resctrl is mounted and readable "
                "(reason in the label when not)", labels=["reason"])
            rdt.add_metric([s.error or ""], 1 if s.available else 0)
            yield rdt
        feat = GaugeMetricFamily(P + "feature_available",
                                 "1 if the host offers the RDT feature",
                                 labels=["feature"])
        for name, test in FEATURES.items():
            feat.add_metric([name], 1 if s.caps and test(s.caps) else 0)
        yield feat
        deg = GaugeMetricFamily(
            P + "degraded", "1 while nova-rdt cannot repair this (see "
            "doc/source/recovery.rst); every reason seen here is listed",
            labels=["reason"])
        for reason in recovery.OBSERVABLE:
            deg.add_metric([reason], 1 if reason in s.degraded else 0)
        yield deg

    def _groups(self, s, bw):
        caps = s.caps
        occ = GaugeMetricFamily(
            P + "llc_occupancy_bytes", "L3 occupancy of the group's tasks",
            labels=GROUP_LABELS + ["cache_id"])
        tot = CounterMetricFamily(
            P + "memory_bandwidth_bytes",
            "Memory bandwidth (MBM total: local and remote), bytes since the"
            " exporter started; use rate()", labels=GROUP_LABELS + ["node"])
        old_tot = CounterMetricFamily(
            P + "memory_bandwidth_total_bytes",
            "Deprecated: use nova_rdt_memory_bandwidth_bytes_total",
            labels=GROUP_LABELS + ["node"])
        loc = CounterMetricFamily(
            P + "memory_bandwidth_local_bytes",
            "Memory bandwidth to the local NUMA node (MBM local), bytes; use "
            "rate()", labels=GROUP_LABELS + ["node"])
        ways = GaugeMetricFamily(
            P + "group_l3_ways", "L3 ways in the group's CBM",
            labels=GROUP_LABELS + ["cache_id", "type"])
        mask = GaugeMetricFamily(
            P + "group_l3_mask", "The group's L3 CBM as an integer",
            labels=GROUP_LABELS + ["cache_id", "type"])
        mb_ratio = GaugeMetricFamily(
            P + "group_mb_ratio", "The group's MB throttle as a fraction "
            "of the peak (schemata percent / 100)",
            labels=GROUP_LABELS + ["node"])
        mb_rate = GaugeMetricFamily(
            P + "group_mb_bytes_per_second", "The group's MB limit in "
            "bytes/s (an mba_MBps mount, or AMD's 1/8 GB/s steps)",
            labels=GROUP_LABELS + ["node"])
        old_mb = GaugeMetricFamily(
            P + "group_mb", "Deprecated: use nova_rdt_group_mb_ratio or "
            "nova_rdt_group_mb_bytes_per_second",
            labels=GROUP_LABELS + ["node", "unit"])
        tasks = GaugeMetricFamily(P + "group_tasks", "Tasks in the group",
                                  labels=GROUP_LABELS + ["scope"])
        cmt = FEATURES["cmt"](caps)
        mbm_t, mbm_l = FEATURES["mbm_total"](caps), FEATURES["mbm_local"](caps)
        for g in s.groups:
            gl = _glabels(g)
            tasks.add_metric(gl + ["ctrl" if g.ctrl else "mon"], g.tasks)
            for r in g.readings:
                node = str(r.domain)
                if cmt and r.llc_occupancy is not None:
                    occ.add_metric(gl + [node], r.llc_occupancy)
                b = bw.get((g.name, r.domain))
                # An unreadable counter is a gap in the series, not a
                # repeat of the last total (rate() would read it as idle).
                if b is not None:
                    if mbm_t and r.mbm_total_bytes is not None:
                        tot.add_metric(gl + [node], b.total_bytes)
                        old_tot.add_metric(gl + [node], b.total_bytes)
                    if mbm_l and r.mbm_local_bytes is not None:
                        loc.add_metric(gl + [node], b.local_bytes)
            for res, doms in g.schemata.items():
                if res in caps.cache and res.startswith("L3"):
                    typ = waymap.CACHE_TYPES[res]
                    for cid, m in doms.items():
                        ways.add_metric(gl + [str(cid), typ],
                                        bin(m).count("1"))
                        mask.add_metric(gl + [str(cid), typ], m)
                elif res in caps.bandwidth:
                    unit = caps.bandwidth[res].units
                    per_unit = MB_BYTES_PER_SECOND.get(unit)
                    for node, v in doms.items():
                        old_mb.add_metric(gl + [str(node), unit], v)
                        if unit == "percent":
                            mb_ratio.add_metric(gl + [str(node)], v / 100)
                        elif per_unit is not None:
                            mb_rate.add_metric(gl + [str(node)],
                                               v * per_unit)
        yield from (occ, tot, loc, ways, mask, mb_ratio, mb_rate, tasks,
                    old_tot, old_mb)

    def _caches(self, s):
        labels = ["cache_id", "type"]
        total = GaugeMetricFamily(P + "cache_ways_total",
                                  "Ways of the L3 cache", labels=labels)
        free = GaugeMetricFamily(
            P + "cache_ways_free", "Ways no group holds, the root "
            "included: what libvirt can still allocate", labels=labels)
        run = GaugeMetricFamily(
            P + "cache_ways_largest_free_run",
            "Longest contiguous run of free ways (a CBM must be contiguous)",
            labels=labels)
        way_bytes = GaugeMetricFamily(
            P + "cache_way_bytes", "Bytes of L3 per way (cache size / "
            "ways): multiply group_l3_ways by it for bytes", labels=labels)
        owner = GaugeMetricFamily(
            P + "way_owner", "1 for each group holding a way: the way map",
            labels=GROUP_LABELS + labels + ["way"])
        for cm in waymap.cache_maps(s):
            if not cm.resource.startswith("L3"):
                continue
            lab = [str(cm.cache_id), cm.cache_type]
            total.add_metric(lab, cm.ways)
            size = s.caps.cache[cm.resource].way_size(cm.cache_id)
            if size:
                way_bytes.add_metric(lab, size)
            free.add_metric(lab, cm.free)
            run.add_metric(lab, cm.largest_free_run)
            for way, holders in enumerate(cm.holders):
                for g in holders:
                    owner.add_metric(_glabels(g) + lab + [str(way)], 1)
        yield from (total, free, run, way_bytes, owner)
        clos_total = s.caps.clos_count
        used = waymap.clos_used(s)
        for name, value, doc in (
                ("clos_total", clos_total, "CLOSIDs, the root's included"),
                ("clos_used", used, "CLOSIDs in use (control groups, the "
                                    "root's included)"),
                ("clos_free", max(clos_total - used, 0),
                 "CLOSIDs left for new groups")):
            g = GaugeMetricFamily(P + name, doc)
            g.add_metric([], value)
            yield g

    def _health(self, seconds, s):
        d = GaugeMetricFamily(P + "scrape_duration_seconds",
                              "Time this scrape spent reading and rendering "
                              "resctrl")
        d.add_metric([], seconds)
        e = CounterMetricFamily(P + "scrape_errors",
                                "resctrl reads that failed, since start")
        e.add_metric([], self.errors)
        u = CounterMetricFamily(
            P + "readings_unavailable",
            "Monitoring readings the kernel gave as Unavailable or Error")
        u.add_metric([], self.unavailable)
        yield from (d, e, u)
