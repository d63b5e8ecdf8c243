"""Writes a report directory: ``report.json``, ``results.csv``,
``trials.csv`` and PNG plots (latency per frame size, the latency
histogram), and comparison plots of two runs as in the ONP app note's
Figures 3-2 (average latency per frame size, CAT off/on) and 3-3
(histogram bins)."""

from __future__ import annotations

import csv
import dataclasses
import json
import os

from nova_rdt.rfc2544.engine import Report

VERSION = 1


def to_dict(r: Report) -> dict:
    cfg = r.config
    return {
        "version": VERSION, "label": r.label, "generator": r.generator,
        "started": r.started, "finished": r.finished,
        "config": {"frame_sizes": list(cfg.frame_sizes),
                   "search": dataclasses.asdict(cfg.search),
                   "latency_duration": cfg.latency_duration,
                   "latency_bins_us": list(cfg.latency_bins_us),
                   "latency_load": cfg.latency_load},
        "throughput_kind": ("RFC 2544 throughput (zero loss)"
                            if cfg.search.loss_tolerance == 0 else
                            f"partial drop rate (loss <= "
                            f"{cfg.search.loss_tolerance:.4%})"),
        "frames": [{
            "frame_size": f.frame_size,
            "throughput": {
                "rate_pps": f.throughput.rate_pps,
                "achieved_pps": f.throughput.achieved_pps,
                "forwarded_pps": f.throughput.forwarded_pps,
                "upper_pps": f.throughput.upper_pps,
                "converged": f.throughput.converged,
                "generator_limited": f.throughput.generator_limited,
                "trials": f.throughput.trial_count, "note": f.throughput.note,
                "trial_log": [{"offered_pps": t.offered_pps,
                               "duration": t.duration, "tx": t.tx,
                               "rx": t.rx, "loss_ratio": t.loss_ratio,
                               "achieved_pps": t.achieved_pps}
                              for t in f.throughput.trials]},
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


def write(r: Report, out_dir: str, plots: bool = True) -> list[str]:
    """Write the report; returns the paths written."""
    os.makedirs(out_dir, exist_ok=True)
    doc = to_dict(r)
    paths = [os.path.join(out_dir, "report.json")]
    with open(paths[0], "w") as f:
        json.dump(doc, f, indent=2, sort_keys=True)
        f.write("\n")
    paths.append(_write_results_csv(doc, out_dir))
    paths.append(_write_trials_csv(doc, out_dir))
    if plots:
        paths += plot_report(doc, out_dir)
    return paths


def _write_results_csv(doc, out_dir) -> str:
    path = os.path.join(out_dir, "results.csv")
    bins = doc["config"]["latency_bins_us"]
    bin_names = ([f"bin_0_{bins[0]:g}us"]
                 + [f"bin_{a:g}_{b:g}us" for a, b in zip(bins, bins[1:])]
                 + [f"bin_over_{bins[-1]:g}us"])
    cols = ["frame_size", "throughput_pps", "achieved_pps", "forwarded_pps",
            "generator_limited", "converged", "trials", "latency_min_us",
            "latency_avg_us", "latency_max_us", "latency_p50_us",
            "latency_p99_us", "latency_p99.9_us"] + bin_names
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for fr in doc["frames"]:
            t, lat = fr["throughput"], fr["latency"] or {}
            pct = lat.get("percentiles_us", {})
            w.writerow([fr["frame_size"], round(t["rate_pps"], 1),
                        round(t["achieved_pps"], 1),
                        round(t["forwarded_pps"], 1),
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
                    "duration", "tx", "rx", "loss_ratio"])
        for fr in doc["frames"]:
            for i, t in enumerate(fr["throughput"]["trial_log"], 1):
                w.writerow([fr["frame_size"], i, round(t["offered_pps"], 1),
                            round(t["achieved_pps"], 1),
                            round(t["duration"], 3), t["tx"], t["rx"],
                            t["loss_ratio"]])
    return path


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
                   for x in range(len(sizes))], [str(s) for s in sizes])
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
