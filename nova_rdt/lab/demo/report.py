"""``report.html``: the lab's results on one page, rendered from
``templates/report.html.j2`` (autoescaped: every value is text)."""

from __future__ import annotations

import base64
import os

import jinja2

TEMPLATE = "report.html.j2"
IMAGES = ("latency.png", "histogram.png")


def environment(*packages: str) -> jinja2.Environment:
    """Templates of ``packages`` (each with a ``templates`` folder), then
    this one's, where the shared ``style.css.j2`` is."""
    return jinja2.Environment(
        loader=jinja2.ChoiceLoader([
            jinja2.PackageLoader(p, "templates")
            for p in (*packages, "nova_rdt.lab.demo")]),
        autoescape=True, undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True)


def way_cells(layout: dict) -> list[dict]:
    """The exporter's ``/api/layout`` as map rows: per cache, the ways
    from highest to lowest, each with its CSS class (the first owner's
    kind, ``shared`` when several own it, ``free`` when none) and the
    owners' labels."""
    rows = []
    for c in layout.get("caches", []):
        cells = []
        for cell in reversed(c["cells"]):
            owners = cell["owners"]
            css = owners[0]["kind"] if owners else "free"
            if len(owners) > 1:
                css += " shared"
            cells.append({"way": cell["way"], "css": css,
                          "title": " + ".join(o["label"] for o in owners)
                          or "free"})
        rows.append({"resource": c["resource"], "cache_id": c["cache_id"],
                     "cells": cells})
    return rows


def frame_rows(rfc: dict) -> list[dict]:
    """One table row per frame size of an RFC 2544 report document."""
    rows = []
    for f in rfc["frames"]:
        t = f["throughput"]
        pct = (f["latency"] or {}).get("percentiles_us", {})
        rows.append({"frame_size": f["frame_size"],
                     "achieved_pps": t["achieved_pps"] or 0,
                     "generator_limited": t["generator_limited"],
                     "status": t.get("status", ""), "mark": t.get("mark", ""),
                     "p50": pct.get("50", "-"), "p99": pct.get("99", "-")})
    return rows


def png_data_uri(path: str) -> str:
    """A PNG file inline, so that the report stands alone."""
    with open(path, "rb") as f:
        return "data:image/png;base64," + base64.b64encode(f.read()).decode()


def render(out_dir: str, **context) -> str:
    """Write ``<out_dir>/report.html``; returns its absolute path.

    ``context``: scenario, emulated, emulation_note, layout, way_map,
    cos_table, seed_table, relations, bad_spec, no_valid_host,
    filter_reasons, rfc (the RFC 2544 report document), metrics,
    log_file.  The RFC 2544 plots are read from ``<out_dir>/rfc2544``.
    """
    layout = context.pop("layout")
    rfc = context.pop("rfc")
    images = [{"name": name,
               "src": png_data_uri(os.path.join(out_dir, "rfc2544", name))}
              for name in IMAGES]
    html = environment().get_template(TEMPLATE).render(
        caches=way_cells(layout), frames=frame_rows(rfc), images=images,
        **context)
    path = os.path.abspath(os.path.join(out_dir, "report.html"))
    with open(path, "w", encoding="utf-8") as f:
        f.write(html)
    return path
