"""The app note's Tables 3-2 and 3-3, from the procedure's conditions.

Pure: dicts in, dicts out; the CSV writers are the only I/O.

* Table 3-2: average latency per frame size, without CAT (flavors
  without ``rdt:`` keys) vs with CAT (the nova-rdt flavors), the
  neighbour busy, and the delta; the idle neighbour of each setting is
  the reference the busy run is compared with.
* Table 3-3: the latency bins, summed over the frame sizes, per
  condition.
"""

from __future__ import annotations

import csv
import math
import os

#: Column of each condition, (rdt, neighbour) -> name.
CONDITION_NAMES = {("off", "idle"): "idle_no_cat",
                   ("off", "busy"): "busy_no_cat",
                   ("on", "idle"): "idle_cat", ("on", "busy"): "busy_cat"}
CONDITION_ORDER = ("idle_no_cat", "busy_no_cat", "idle_cat", "busy_cat")

TABLE_3_2_COLUMNS = (
    "frame_size", "idle_no_cat_us", "busy_no_cat_us", "idle_cat_us",
    "busy_cat_us", "delta_us", "delta_pct", "busy_vs_idle_no_cat",
    "busy_vs_idle_cat")


def _number(v) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def ratio(a, b) -> float | None:
    """a / b, or None when either is missing, b is not positive or the
    quotient is not finite."""
    a, b = _number(a), _number(b)
    if a is None or b is None or b <= 0:
        return None
    r = a / b
    return r if math.isfinite(r) else None     # a tiny b overflows


def _pct(part, whole) -> float | None:
    r = None if part is None else ratio(part, whole)
    if r is None or not math.isfinite(100 * r):
        return None
    return 100 * r


def _round(v, digits=3):
    return None if v is None else round(v, digits)


def _by_condition(conditions: list[dict]) -> dict[str, dict[int, dict]]:
    out = {}
    for c in conditions:
        name = CONDITION_NAMES.get((c.get("rdt"), c.get("neighbour")))
        if name is None:
            raise ValueError(f"condition rdt={c.get('rdt')!r} neighbour="
                             f"{c.get('neighbour')!r} is not one of the four")
        out[name] = {f["frame_size"]: f for f in c.get("frames") or []}
    return out


def table_3_2(conditions: list[dict]) -> list[dict]:
    """One row per frame size (in the order first measured).

    ``delta_us`` is no-CAT minus CAT with the neighbour busy (positive:
    CAT lowered the latency), ``delta_pct`` that over no-CAT;
    ``busy_vs_idle_*`` is the busy run over its idle reference."""
    by = _by_condition(conditions)
    sizes = []
    for name in CONDITION_ORDER:
        for s in by.get(name, {}):
            if s not in sizes:
                sizes.append(s)
    rows = []
    for s in sizes:
        avg = {name: _number((by.get(name, {}).get(s) or {})
                             .get("avg_latency_us"))
               for name in CONDITION_ORDER}
        delta = (None if avg["busy_no_cat"] is None or avg["busy_cat"] is None
                 else avg["busy_no_cat"] - avg["busy_cat"])
        rows.append({
            "frame_size": s,
            **{f"{n}_us": _round(avg[n]) for n in CONDITION_ORDER},
            "delta_us": _round(delta),
            "delta_pct": _round(_pct(delta, avg["busy_no_cat"]), 2),
            "busy_vs_idle_no_cat": _round(ratio(avg["busy_no_cat"],
                                                avg["idle_no_cat"])),
            "busy_vs_idle_cat": _round(ratio(avg["busy_cat"],
                                             avg["idle_cat"])),
        })
    return rows


def _bin_key(b: dict):
    hi = b.get("to_us")
    return (float(b["from_us"]), math.inf if hi is None else float(hi))


def table_3_3(conditions: list[dict]) -> list[dict]:
    """One row per latency bin (``to_us`` None: open-ended), the counts
    of each condition summed over its frame sizes."""
    by = _by_condition(conditions)
    counts: dict[tuple, dict[str, int]] = {}
    for name in CONDITION_ORDER:
        for f in by.get(name, {}).values():
            for b in f.get("bins") or []:
                row = counts.setdefault(_bin_key(b), {})
                row[name] = row.get(name, 0) + int(b["count"])
    rows = []
    for (lo, hi) in sorted(counts):
        row = counts[(lo, hi)]
        rows.append({"from_us": lo, "to_us": None if hi == math.inf else hi,
                     **{n: (row.get(n, 0) if n in by else None)
                        for n in CONDITION_ORDER}})
    return rows


def build(conditions: list[dict]) -> dict:
    return {"table_3_2": table_3_2(conditions),
            "table_3_3": table_3_3(conditions)}


TABLE_3_3_COLUMNS = ("from_us", "to_us") + CONDITION_ORDER


def write_csv(tables: dict, out_dir: str) -> list[str]:
    """``table_3_2.csv`` and ``table_3_3.csv`` in ``out_dir``; returns
    the paths.  Missing values are empty cells."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for name, cols in (("table_3_2", TABLE_3_2_COLUMNS),
                       ("table_3_3", TABLE_3_3_COLUMNS)):
        path = os.path.join(out_dir, f"{name}.csv")
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(cols)
            for row in tables.get(name) or []:
                w.writerow(["" if row.get(c) is None else row.get(c)
                            for c in cols])
        paths.append(path)
    return paths


def _cell(v, fmt="{:.1f}") -> str:
    return "-" if v is None else fmt.format(v)


def render_text(tables: dict) -> str:
    """Both tables as plain text, for a console or a closing note."""
    lines = ["Table 3-2 analogue: average latency (µs) per frame size",
             f"{'frame':>6} {'idle':>9} {'busy':>9} {'idle':>9} {'busy':>9}"
             f" {'delta':>9} {'delta':>7}",
             f"{'(B)':>6} {'no CAT':>9} {'no CAT':>9} {'CAT':>9} {'CAT':>9}"
             f" {'(µs)':>9} {'(%)':>7}"]
    for r in tables.get("table_3_2") or []:
        lines.append(f"{r['frame_size']:>6} {_cell(r['idle_no_cat_us']):>9}"
                     f" {_cell(r['busy_no_cat_us']):>9}"
                     f" {_cell(r['idle_cat_us']):>9}"
                     f" {_cell(r['busy_cat_us']):>9}"
                     f" {_cell(r['delta_us']):>9}"
                     f" {_cell(r['delta_pct']):>7}")
    lines += ["", "Table 3-3 analogue: latency bins, all frame sizes",
              f"{'bin (µs)':>13} " + " ".join(f"{n:>11}"
                                               for n in CONDITION_ORDER)]
    for r in tables.get("table_3_3") or []:
        label = (f"{r['from_us']:g}-{r['to_us']:g}" if r["to_us"] is not None
                 else f">{r['from_us']:g}")
        lines.append(f"{label:>13} " + " ".join(
            f"{_cell(r[n], '{:d}'):>11}" for n in CONDITION_ORDER))
    return "\n".join(lines)
