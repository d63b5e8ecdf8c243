"""Writes a report directory: ``report.json``, ``results.csv``,
``trials.csv``, PNG plots (latency per frame size, the latency
histogram) and ``report.html`` (all of it on one page), and comparison
plots of two runs as in the ONP app note's
Figures 3-2 (average latency per frame size, CAT off/on) and 3-3
(histogram bins)."""

from __future__ import annotations

import base64
import csv
import dataclasses
import html
import json
import math
import os

from nova_rdt.rfc2544 import engine
from nova_rdt.rfc2544 import wording
from nova_rdt.rfc2544.engine import Report

VERSION = 1


def to_dict(r: Report) -> dict:
    cfg = r.config
    doc = {
        "version": VERSION, "label": r.label, "generator": r.generator,
        "started": r.started, "finished": r.finished,
        "config": {"frame_sizes": list(cfg.frame_sizes),
                   "search": dataclasses.asdict(cfg.search),
                   "latency_duration": cfg.latency_duration,
                   "latency_bins_us": list(cfg.latency_bins_us),
                   "latency_load": cfg.latency_load,
                   "goals": [dataclasses.asdict(g) | {"label": g.label}
                             for g in cfg.goals]},
        "throughput_kind": _kind(cfg.goals[0].loss_ratio if cfg.goals
                                 else cfg.search.loss_tolerance),
        "frames": [{
            "frame_size": f.frame_size,
            "throughput": {
                # RFC 2544 throughput: forwarded at the highest pass.
                "throughput_pps": f.throughput.throughput_pps,
                "rate_pps": f.throughput.rate_pps,
                "offered_pps": f.throughput.offered_pps,
                "achieved_pps": f.throughput.achieved_pps,
                "forwarded_pps": f.throughput.forwarded_pps,
                "upper_pps": f.throughput.upper_pps,
                "converged": f.throughput.converged,
                "generator_limited": f.throughput.generator_limited,
                "trials": f.throughput.trial_count, "note": f.throughput.note,
                "trial_seconds": f.throughput.trial_seconds,
                "log": list(f.throughput.log),
                "trial_log": [{"offered_pps": t.offered_pps,
                               "duration": t.duration, "tx": t.tx,
                               "rx": t.rx, "loss_ratio": t.loss_ratio,
                               "achieved_pps": t.achieved_pps,
                               "generator_limited": t.generator_limited}
                              for t in f.throughput.trials]},
            "goals": [engine.goal_dict(g) for g in f.goals],
            "latency": None if f.latency is None else {
                "rate_pps": f.latency.rate_pps, "samples": f.latency.samples,
                "min_us": f.latency.min_us, "avg_us": f.latency.avg_us,
                "max_us": f.latency.max_us,
                "percentiles_us": f.latency.percentiles_us,
                "lost_probes": f.latency.lost,
                "bins": [{"from_us": lo, "to_us": hi, "count": n}
                         for lo, hi, n in f.latency.bins]},
        } for f in r.frames],
    }
    for fr in doc["frames"]:
        fr["throughput"]["status"] = wording.status(fr["throughput"])
        fr["throughput"]["mark"] = wording.mark(fr["throughput"])
    return finite(doc)


def _kind(tolerance: float) -> str:
    """What the throughput column is, by the loss it allows (with
    goals, the first goal's)."""
    if tolerance == 0:
        return "RFC 2544 throughput (zero loss)"
    return f"partial drop rate (loss <= {tolerance:.4%})"


def finite(obj):
    """The document with every NaN or infinity as null: JSON has none."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def write(r: Report, out_dir: str, plots: bool = True) -> list[str]:
    """Write the report; returns the paths written."""
    os.makedirs(out_dir, exist_ok=True)
    doc = to_dict(r)
    paths = [os.path.join(out_dir, "report.json")]
    with open(paths[0], "w") as f:
        json.dump(doc, f, indent=2, sort_keys=True, allow_nan=False)
        f.write("\n")
    paths.append(_write_results_csv(doc, out_dir))
    paths.append(_write_trials_csv(doc, out_dir))
    if any(fr.get("goals") for fr in doc["frames"]):
        paths.append(_write_goals_csv(doc, out_dir))
    if plots:
        paths += plot_report(doc, out_dir)
    paths.append(write_html(doc, out_dir, [p for p in paths
                                           if p.endswith(".png")]))
    return paths


GOAL_COLUMNS = ["frame_size", "goal", "loss_ratio", "exceed_ratio",
                "final_trial_duration", "duration_sum",
                "conditional_throughput_pps", "lower_bound_pps",
                "upper_bound_pps", "converged", "trials", "trial_seconds"]


def _write_goals_csv(doc, out_dir) -> str:
    """One row per frame size and goal (RFC 9971's results), beside
    results.csv (the ONP app note's columns, for the first goal)."""
    path = os.path.join(out_dir, "goals.csv")
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(GOAL_COLUMNS)
        for fr in doc["frames"]:
            for g in fr.get("goals") or ():
                w.writerow([fr["frame_size"]] + [g[c] for c in
                                                 GOAL_COLUMNS[1:]])
    return path


def _write_results_csv(doc, out_dir) -> str:
    path = os.path.join(out_dir, "results.csv")
    bins = doc["config"]["latency_bins_us"]
    bin_names = ([f"bin_0_{bins[0]:g}us"]
                 + [f"bin_{a:g}_{b:g}us" for a, b in zip(bins, bins[1:])]
                 + [f"bin_over_{bins[-1]:g}us"])
    # The mark stands right after the number it qualifies.
    cols = ["frame_size", "throughput_pps", "status", "mark", "achieved_pps",
            "forwarded_pps", "offered_pps", "upper_pps",
            "generator_limited", "converged", "trials", "latency_min_us",
            "latency_avg_us", "latency_max_us", "latency_p50_us",
            "latency_p99_us", "latency_p99.9_us"] + bin_names
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for fr in doc["frames"]:
            t, lat = fr["throughput"], fr["latency"] or {}
            pct = lat.get("percentiles_us", {})
            w.writerow([fr["frame_size"], round(t["throughput_pps"], 1),
                        t["status"], t["mark"],
                        round(t["achieved_pps"], 1),
                        round(t["forwarded_pps"], 1),
                        round(t["offered_pps"], 1),
                        None if t["upper_pps"] is None
                        else round(t["upper_pps"], 1),
                        t["generator_limited"], t["converged"], t["trials"],
                        lat.get("min_us"), lat.get("avg_us"),
                        lat.get("max_us"), pct.get("50"), pct.get("99"),
                        pct.get("99.9")]
                       + [b["count"] for b in lat.get("bins", [])])
    return path


def _write_trials_csv(doc, out_dir) -> str:
    path = os.path.join(out_dir, "trials.csv")
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["frame_size", "trial", "offered_pps", "achieved_pps",
                    "duration", "tx", "rx", "loss_ratio",
                    "generator_limited"])
        for fr in doc["frames"]:
            for i, t in enumerate(fr["throughput"]["trial_log"], 1):
                w.writerow([fr["frame_size"], i, round(t["offered_pps"], 1),
                            round(t["achieved_pps"], 1),
                            round(t["duration"], 3), t["tx"], t["rx"],
                            t["loss_ratio"], t["generator_limited"]])
    return path


def write_html(doc: dict, out_dir: str, images: list[str]) -> str:
    """One self-contained page: the results table (every mark in words
    beside its number), the plots, the trial log."""
    esc = html.escape
    rows = []
    for fr in doc["frames"]:
        t, lat = fr["throughput"], fr["latency"] or {}
        pct = lat.get("percentiles_us") or {}
        mark = (f'<br><span class="mark {esc(t["status"])}">'
                f'{esc(t["mark"])}</span>' if t["mark"] else "")
        rows.append(
            f"<tr><td>{fr['frame_size']}</td>"
            f"<td>{t['throughput_pps']:,.0f}{mark}</td>"
            f"<td>{t['achieved_pps']:,.0f}</td><td>{t['trials']}</td>"
            f"<td>{_num(lat.get('avg_us'))}</td><td>{_num(pct.get('50'))}"
            f"</td><td>{_num(pct.get('99'))}</td></tr>")
    goals = "".join(
        f"<tr><td>{fr['frame_size']}</td><td>{esc(g['goal'])}</td>"
        f"<td>{g['loss_ratio']:.4%}</td><td>{g['exceed_ratio']:g}</td>"
        f"<td>{g['final_trial_duration']:g}</td>"
        f"<td>{g['duration_sum']:g}</td>"
        f"<td>{g['conditional_throughput_pps']:,.0f}</td>"
        f"<td>{g['lower_bound_pps']:,.0f}</td>"
        f"<td>{_pps(g['upper_bound_pps'])}</td></tr>"
        for fr in doc["frames"] for g in fr.get("goals") or ())
    if goals:
        goals = ('<h2>Search goals (RFC 9971)</h2><table id="goals"><tr>'
                 '<th>frame (B)</th><th>goal</th><th>loss ratio</th>'
                 '<th>exceed ratio</th><th>final trial (s)</th>'
                 '<th>duration sum (s)</th><th>conditional throughput '
                 '(pps)</th><th>lower bound (pps)</th><th>upper bound '
                 f'(pps)</th></tr>{goals}</table>')
    trials = "".join(
        f"<tr><td>{fr['frame_size']}</td><td>{i}</td>"
        f"<td>{t['offered_pps']:,.0f}</td><td>{t['achieved_pps']:,.0f}"
        f"{' (generator-limited)' if t['generator_limited'] else ''}</td>"
        f"<td>{t['duration']:g}</td>"
        f"<td>{t['loss_ratio']:.4%}</td></tr>"
        for fr in doc["frames"]
        for i, t in enumerate(fr["throughput"]["trial_log"], 1))
    imgs = []
    for p in images:
        with open(p, "rb") as f:
            imgs.append(f'<img alt="{esc(os.path.basename(p))}" src="data:'
                        f'image/png;base64,{base64.b64encode(f.read()).decode()}">')
    title = f"RFC 2544: {doc['label'] or 'run'} ({doc['generator']})"
    page = f"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<title>{esc(title)}</title><style>
body{{font:14px/1.4 system-ui,sans-serif;margin:1.5em;max-width:1100px}}
td,th{{padding:2px 10px;border-bottom:1px solid #ddd;text-align:right}}
.mark{{font-size:12px;color:#b00;text-align:left}} img{{max-width:48%}}
</style></head><body><h1>{esc(title)}</h1>
<p>Throughput is what the DUT forwarded at the highest rate that passed
({esc(doc['throughput_kind'])}).</p>
<table id="results"><tr><th>frame (B)</th><th>throughput (pps)</th>
<th>sent (pps)</th><th>trials</th><th>avg µs</th><th>p50 µs</th>
<th>p99 µs</th></tr>{''.join(rows)}</table>
{goals}
<p>{' '.join(imgs)}</p>
<h2>Trials</h2><table id="trials"><tr><th>frame (B)</th><th>trial</th>
<th>offered (pps)</th><th>sent (pps)</th><th>seconds</th><th>loss</th>
</tr>{trials}</table>
</body></html>
"""
    path = os.path.join(out_dir, "report.html")
    with open(path, "w") as f:
        f.write(page)
    return path


def _tick(docs: dict[str, dict], size: int) -> str:
    """A frame size's axis label, with the words a result there needs
    (the throughput it was measured at is not a plain number then)."""
    marks = sorted({wording.status(fr["throughput"])
                    for d in docs.values() for fr in d["frames"]
                    if fr["frame_size"] == size} - {"ok"})
    return "\n".join([str(size)] + marks)


def _pps(v) -> str:
    return "-" if v is None else f"{v:,.0f}"


def _num(v) -> str:
    return "-" if v is None else f"{v:.1f}"


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_report(doc: dict, out_dir: str) -> list[str]:
    return compare({doc["label"] or "run": doc}, out_dir, prefix="")


def compare(docs: dict[str, dict], out_dir: str,
            prefix: str = "compare-") -> list[str]:
    """Average latency per frame size (Figure 3-2) and histogram bins
    (Figure 3-3) of one or more runs side by side."""
    plt = _plt()
    os.makedirs(out_dir, exist_ok=True)
    labels = list(docs)
    sizes = sorted({fr["frame_size"] for d in docs.values()
                    for fr in d["frames"]})
    width = 0.8 / max(len(labels), 1)
    paths = []

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, label in enumerate(labels):
        by = {fr["frame_size"]: fr["latency"] for fr in docs[label]["frames"]}
        avg = [(by.get(s) or {}).get("avg_us") or 0 for s in sizes]
        ax.bar([x + i * width for x in range(len(sizes))], avg, width,
               label=label)
    ax.set_xticks([x + width * (len(labels) - 1) / 2
                   for x in range(len(sizes))],
                  [_tick(docs, s) for s in sizes])
    ax.set_xlabel("frame size (bytes)")
    ax.set_ylabel("average latency (µs)")
    ax.set_title("Average latency at the throughput found")
    ax.legend()
    fig.tight_layout()
    paths.append(os.path.join(out_dir, f"{prefix}latency.png"))
    fig.savefig(paths[-1], dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(9, 4.5))
    names = None
    for i, label in enumerate(labels):
        counts = None
        for fr in docs[label]["frames"]:
            lat = fr["latency"]
            if not lat:
                continue
            if counts is None:
                counts = [0] * len(lat["bins"])
                names = [(f"{b['from_us']:g}-{b['to_us']:g}"
                          if b["to_us"] is not None
                          else f">{b['from_us']:g}") for b in lat["bins"]]
            for j, b in enumerate(lat["bins"]):
                counts[j] += b["count"]
        if counts is None:
            continue
        total = sum(counts) or 1
        ax.bar([x + i * width for x in range(len(counts))],
               [100 * c / total for c in counts], width, label=label)
    if names:
        ax.set_xticks([x + width * (len(labels) - 1) / 2
                       for x in range(len(names))], names, rotation=30)
    ax.set_xlabel("latency bin (µs)")
    ax.set_ylabel("share of probes (%)")
    ax.set_title("Latency histogram, all frame sizes")
    ax.legend()
    fig.tight_layout()
    paths.append(os.path.join(out_dir, f"{prefix}histogram.png"))
    fig.savefig(paths[-1], dpi=100)
    plt.close(fig)
    return paths
