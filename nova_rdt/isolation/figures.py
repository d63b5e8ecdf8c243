"""Figures 3-2 and 3-3 of the app note, from the summary's tables.

matplotlib is optional (imported here, Agg backend): without it
:func:`write` draws nothing and says so by returning no paths.
"""

from __future__ import annotations

import os

from nova_rdt.isolation import tables as tables_mod

LABELS = {"idle_no_cat": "neighbour idle, no CAT",
          "busy_no_cat": "neighbour busy, no CAT",
          "idle_cat": "neighbour idle, CAT",
          "busy_cat": "neighbour busy, CAT"}
# Idle references pale, busy runs solid; no-CAT warm, CAT cool.
COLOURS = {"idle_no_cat": "#f4b183", "busy_no_cat": "#c55a11",
           "idle_cat": "#9dc3e6", "busy_cat": "#2e75b6"}


def _plt():
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _present(rows, suffix=""):
    return [n for n in tables_mod.CONDITION_ORDER
            if any(r.get(n + suffix) is not None for r in rows)]


def figure_3_2(plt, rows: list[dict], path: str, note: str = "") -> str:
    names = _present(rows, "_us")
    width = 0.8 / max(len(names), 1)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, n in enumerate(names):
        ax.bar([x + i * width for x in range(len(rows))],
               [r.get(n + "_us") or 0 for r in rows], width,
               label=LABELS[n], color=COLOURS[n])
    ax.set_xticks([x + width * (len(names) - 1) / 2
                   for x in range(len(rows))],
                  [str(r["frame_size"]) for r in rows])
    ax.set_xlabel("frame size (bytes)")
    ax.set_ylabel("average latency (µs)")
    ax.set_title("Figure 3-2 analogue: forwarding VM latency, "
                 "no CAT vs CAT" + (f"\n{note}" if note else ""),
                 fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def figure_3_3(plt, rows: list[dict], path: str, note: str = "") -> str:
    names = _present(rows)
    width = 0.8 / max(len(names), 1)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for i, n in enumerate(names):
        counts = [r.get(n) or 0 for r in rows]
        total = sum(counts) or 1
        ax.bar([x + i * width for x in range(len(rows))],
               [100 * c / total for c in counts], width, label=LABELS[n],
               color=COLOURS[n])
    ax.set_xticks([x + width * (len(names) - 1) / 2
                   for x in range(len(rows))],
                  [(f"{r['from_us']:g}-{r['to_us']:g}"
                    if r["to_us"] is not None else f">{r['from_us']:g}")
                   for r in rows], rotation=30)
    ax.set_xlabel("latency bin (µs)")
    ax.set_ylabel("share of probes (%)")
    ax.set_title("Figure 3-3 analogue: latency bins, all frame sizes"
                 + (f"\n{note}" if note else ""), fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write(summary: dict, out_dir: str) -> list[str]:
    """``figure_3_2.png`` and ``figure_3_3.png`` in ``out_dir``; returns
    their paths, or [] without matplotlib."""
    plt = _plt()
    if plt is None:
        return []
    os.makedirs(out_dir, exist_ok=True)
    note = ("RDT emulated: CAT not enforced by hardware"
            if summary.get("rdt") == "emulated" else "")
    tables = summary.get("tables") or {}
    return [
        figure_3_2(plt, tables.get("table_3_2") or [],
                   os.path.join(out_dir, "figure_3_2.png"), note),
        figure_3_3(plt, tables.get("table_3_3") or [],
                   os.path.join(out_dir, "figure_3_3.png"), note),
    ]
