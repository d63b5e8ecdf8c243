"""The procedure's frame dicts from an RFC 2544 report.

Both clouds run :mod:`nova_rdt.rfc2544`; this turns its report document
(:func:`nova_rdt.rfc2544.report.to_dict`) into what
:meth:`~nova_rdt.isolation.cloud.IsolationCloud.measure` returns, so the
two sides cannot drift apart.
"""

from __future__ import annotations


def from_report(doc: dict) -> list[dict]:
    """One dict per frame size: the interface's keys plus ``sent`` and
    ``received`` (frames over all throughput trials), ``throughput_status``
    and ``lost_probes``."""
    out = []
    for fr in doc.get("frames") or []:
        t = fr["throughput"]
        lat = fr.get("latency") or {}
        pct = lat.get("percentiles_us") or {}
        trials = t.get("trial_log") or []
        out.append({
            "frame_size": fr["frame_size"],
            "throughput_pps": t.get("throughput_pps"),
            "converged": bool(t.get("converged")),
            "generator_limited": bool(t.get("generator_limited")),
            "avg_latency_us": lat.get("avg_us"),
            "p99_us": pct.get("99"),
            "bins": [dict(b) for b in lat.get("bins") or []],
            "sent": sum(int(x.get("tx") or 0) for x in trials),
            "received": sum(int(x.get("rx") or 0) for x in trials),
            "throughput_status": t.get("status"),
            "lost_probes": lat.get("lost_probes"),
        })
    return out
