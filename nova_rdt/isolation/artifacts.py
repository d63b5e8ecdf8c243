"""Everything a run leaves on disk, the same for the lab and Tempest:
``summary.json``, ``table_3_2.csv``, ``table_3_3.csv``, ``tables.txt``
and the two figures."""

from __future__ import annotations

import json
import os

from nova_rdt.isolation import figures
from nova_rdt.isolation import tables as tables_mod
from nova_rdt.rfc2544.report import finite

SUMMARY = "summary.json"


def write(summary: dict, out_dir: str, plots: bool = True) -> list[str]:
    """Write the artefacts of ``summary`` into ``out_dir``; returns the
    paths written (no figures without matplotlib or with plots=False)."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, SUMMARY)
    with open(path, "w") as f:
        json.dump(finite(summary), f, indent=2, sort_keys=True,
                  allow_nan=False)
        f.write("\n")
    paths = [path]
    tables = summary.get("tables") or {}
    paths += tables_mod.write_csv(tables, out_dir)
    text = os.path.join(out_dir, "tables.txt")
    with open(text, "w") as f:
        f.write(tables_mod.render_text(tables) + "\n")
    paths.append(text)
    if plots:
        paths += figures.write(summary, out_dir)
    return paths
