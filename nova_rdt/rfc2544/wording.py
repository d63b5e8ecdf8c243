"""How a throughput result is said, the same way on the console, in
``results.csv`` and in the HTML report: a not-converged or
generator-limited number always carries its mark, in words."""

from __future__ import annotations


def mark(t: dict) -> str:
    """The words that must stand next to a result's number ("" if it
    needs none).  ``t`` is a report's ``throughput`` mapping or an
    engine ``result`` event."""
    words = []
    sent = t.get("achieved_pps") or 0.0
    if t.get("generator_limited"):
        words.append(f"GENERATOR-LIMITED: the generator sent at most "
                     f"{sent:,.0f} pps and the DUT kept up, so its capacity "
                     f"is at least {sent:,.0f} pps")
    if not t.get("converged"):
        why = t.get("note") or "the bracket is still wider than the resolution"
        upper = t.get("upper_pps")
        span = (f"; the edge is between {sent:,.0f} and {upper:,.0f} pps sent"
                if upper else "")
        words.append(f"NOT CONVERGED ({why.split('; generator-limited')[0]})"
                     f"{span}")
    return "; ".join(words)


def status(t: dict) -> str:
    """One word for tables: ok, generator-limited, not-converged."""
    if not t.get("converged"):
        return "not-converged"
    if t.get("generator_limited"):
        return "generator-limited"
    return "ok"


def result_line(ev: dict) -> str:
    """The console's result line for one frame size."""
    lat = ev.get("avg_latency_us")
    m = mark(ev)
    return (f"[{ev['frame_size']} B] throughput {ev['throughput_pps']:,.0f} "
            f"pps forwarded"
            f"{' [' + m + ']' if m else ''}"
            f" (at {ev['achieved_pps']:,.0f} pps sent, {ev['trials']} "
            f"trials), average latency "
            f"{'-' if lat is None else f'{lat:.1f} µs'}")
