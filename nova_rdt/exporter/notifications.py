"""Versioned notification payloads from samples: pure.

Payloads are oslo.versionedobjects (:mod:`nova_rdt.exporter.payloads`)
serialised with Nova's versioned-notification envelope (``nova_object.*``
keys), so consumers that read Nova's notifications (Ceilometer, Watcher)
parse them the same way.  Samples are in doc/notification_samples/.
Event types:

``rdt.allocation.create`` / ``.update`` / ``.delete``
    a control group appeared, changed its schemata or went away
``rdt.instance.sample``
    one instance's L3 occupancy and memory bandwidth, periodically
"""

from __future__ import annotations

from nova_rdt.exporter import payloads
from nova_rdt.exporter import waymap


def _schemata(g, caps) -> dict:
    out = {}
    for res, doms in g.schemata.items():
        cache = res in caps.cache
        out[res] = {str(d): (f"{v:x}" if cache else v)
                    for d, v in sorted(doms.items())}
    return out


def _who(g) -> dict:
    i = g.identity
    return {"group": g.name, "kind": i.kind, "label": waymap.label(g),
            "instance_uuid": i.instance_uuid or None,
            "instance_name": i.instance_name or None,
            "flavor": i.flavor or None, "rdt_class": i.rdt_class or None}


def allocation_changes(host: str, prev, cur) -> list[tuple[str, dict]]:
    """(event_type, payload) for each control group that changed."""
    if cur.caps is None:
        return []
    before = {g.name: g for g in prev.groups if g.ctrl} \
        if prev is not None and prev.caps is not None else None
    now = {g.name: g for g in cur.groups if g.ctrl}
    if before is None:
        return []              # the first sample is the baseline
    out = []
    for name in sorted(set(before) | set(now)):
        old, new = before.get(name), now.get(name)
        if old is not None and new is not None \
                and old.schemata == new.schemata:
            continue
        action = ("create" if old is None else
                  "delete" if new is None else "update")
        g = new or old
        data = {"host": host, **_who(g),
                "schemata": _schemata(new, cur.caps) if new else None,
                "previous": (_schemata(old, prev.caps)
                             if old is not None else None)}
        out.append((f"rdt.allocation.{action}",
                    payloads.RdtAllocationPayload(**data).to_primitive()))
    return out


def instance_samples(host: str, s, bw, period: float) -> list[dict]:
    """One ``rdt.instance.sample`` payload per instance group."""
    out = []
    if s.caps is None:
        return out
    for g in s.groups:
        if g.identity.kind != "instance":
            continue
        ways = {str(cid): bin(m).count("1")
                for res, doms in g.schemata.items() if res.startswith("L3")
                for cid, m in doms.items()}
        bandwidth = {}
        for r in g.readings:
            b = bw.get((g.name, r.domain))
            if b is not None:
                bandwidth[str(r.domain)] = {
                    "total_bytes_per_second": b.total_rate,
                    "local_bytes_per_second": b.local_rate}
        data = {"host": host, **_who(g), "period_seconds": period,
                "timestamp": s.taken_at,
                "llc_occupancy_bytes": {
                    str(r.domain): r.llc_occupancy for r in g.readings
                    if r.llc_occupancy is not None},
                "memory_bandwidth": bandwidth, "l3_ways": ways}
        out.append(payloads.RdtInstanceSamplePayload(**data).to_primitive())
    return out
