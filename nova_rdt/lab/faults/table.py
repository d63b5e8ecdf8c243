"""The console table of the faults scenario: points down, faults across,
each cell the seconds to converge (``FAIL`` when it did not): pure."""

from __future__ import annotations

from nova_rdt.lab.faults import plan

SHORT = {"failpoint-raise": "raise", "failpoint-exit": "exit",
         "compute-restart": "restart", "libvirtd-restart": "libvirtd",
         "resctrl-lost": "lost", "emulator-killed": "killed",
         "enospc": "enospc", "readonly": "ro"}


def cell(result: dict) -> str:
    if not result["converged"]:
        return "FAIL"
    s = result.get("seconds_to_converge")
    return f"{s:.1f}s" if s is not None else "ok"


def render(results: list[dict]) -> str:
    faults = [f for f in plan.FAULTS if any(r["fault"] == f
                                            for r in results)]
    points: list[str] = []
    for r in results:
        if r["point"] not in points:
            points.append(r["point"])
    by = {(r["fault"], r["point"]): cell(r) for r in results}
    width = max([len(p) for p in points] + [5])
    cols = [max(len(SHORT[f]), 7) for f in faults]
    lines = ["point".ljust(width) + "  " + "  ".join(
        SHORT[f].rjust(w) for f, w in zip(faults, cols))]
    lines.append("-" * len(lines[0]))
    for p in points:
        lines.append(p.ljust(width) + "  " + "  ".join(
            by.get((f, p), "").rjust(w) for f, w in zip(faults, cols)))
    return "\n".join(lines)
