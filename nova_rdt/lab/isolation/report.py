"""``<out>/report.html`` of the isolation scenario: the facts of the run,
the Table 3-2/3-3 analogues with Figures 3-2 and 3-3 inline (the page
stands alone, as the demo's does), each condition's results with their
marks in words, the checks and the notes.  Rendered from
``templates/isolation.html.j2`` with the demo report's environment
(autoescaped: every value is text)."""

from __future__ import annotations

import os

from nova_rdt.isolation import tables as iso_tables
from nova_rdt.lab.demo import report as demo_report

TEMPLATE = "isolation.html.j2"
FIGURES = (("figure_3_2.png", "Figure 3-2 analogue: average latency per "
                              "frame size, per condition"),
           ("figure_3_3.png", "Figure 3-3 analogue: latency histogram, "
                              "all frame sizes"))


def _mark(frame: dict) -> str:
    words = []
    if frame.get("generator_limited"):
        words.append("generator-limited: the VM's capacity is at least "
                     "this")
    if frame.get("converged") is False:
        words.append("not converged")
    return "; ".join(words)


def _rate(counters: dict | None) -> str:
    c = counters or {}
    if not c.get("rdt_group"):
        return "no resctrl group"
    mbm = c.get("mbm_total_bytes_per_s")
    llc = c.get("llc_occupancy_bytes")
    parts = [c["rdt_group"]]
    if mbm is not None:
        parts.append(f"MBM {mbm / 1e6:,.1f} MB/s")
    if llc is not None:
        parts.append(f"LLC {llc / 2**20:,.2f} MiB")
    if c.get("counters_error"):
        parts.append(f"not read: {c['counters_error']}")
    return ", ".join(parts)


def condition_rows(summary: dict) -> list[dict]:
    """One row per condition and frame size, in the order measured."""
    rows = []
    for c in summary.get("conditions") or []:
        load = c.get("neighbour_load") or {}
        ports = c.get("vm_ports") or {}
        for f in c.get("frames") or []:
            rows.append({
                "rdt": c.get("rdt"), "neighbour": c.get("neighbour"),
                "frame_size": f.get("frame_size"),
                "throughput_pps": f.get("throughput_pps"),
                "mark": _mark(f),
                "avg_latency_us": f.get("avg_latency_us"),
                "p99_us": f.get("p99_us"),
                "vm_rx": ports.get("rx"), "vm_tx": ports.get("tx"),
                "cpu_share": load.get("cpu_share"),
                "counters": _rate(load.get("counters"))})
    return rows


def figures(summary: dict, iso_dir: str) -> tuple[list[dict], str]:
    """(the figures inline, why they are missing or "")."""
    made = {os.path.basename(p) for p in summary.get("figures") or []}
    out = [{"title": title, "src": demo_report.png_data_uri(
                os.path.join(iso_dir, name))}
           for name, title in FIGURES if name in made]
    why = "" if out else (summary.get("figures_skipped")
                          or "the figures were not made (matplotlib missing?)")
    return out, why


def held(verdicts: list[dict]) -> int:
    """Checks that hold: every one but a binding check that failed (the
    console's count)."""
    return sum(1 for v in verdicts
               if not (v.get("binding") and v.get("ok") is False))


def render(out_dir: str, summary: dict) -> str:
    """Write ``<out_dir>/report.html``; returns its absolute path."""
    iso_dir = os.path.join(out_dir, "isolation")
    images, missing = figures(summary, iso_dir)
    tables = summary.get("tables") or {}
    facts = summary.get("facts") or {}
    html = demo_report.environment("nova_rdt.lab.isolation").get_template(
        TEMPLATE).render(
        s=summary, facts=facts, notes=summary.get("notes") or [],
        table_3_2=tables.get("table_3_2") or [],
        table_3_3=tables.get("table_3_3") or [],
        conditions=iso_tables.CONDITION_ORDER,
        rows=condition_rows(summary), images=images, figures_missing=missing,
        libvirt_groups=facts.get("libvirt_groups") or {},
        machine_forces=facts.get("machine_forces") or [],
        verdicts=summary.get("verdicts") or [],
        held=held(summary.get("verdicts") or []))
    path = os.path.abspath(os.path.join(out_dir, "report.html"))
    with open(path, "w", encoding="utf-8") as f:
        f.write(html)
    return path
