"""Whether a Grafana dashboard can mislead on a multi-tenant cloud, judged
by what a real Prometheus returns for each of its queries.

A panel misleads when one of its series stands for two instances (it
aggregated them: keyed by display name, it shows two tenants' "web-1" as
one), when it drops ``host`` or ignores the host variable, when it shows
one instance of a shared name and not the other, or when two of its
series would carry one legend.
"""

from __future__ import annotations

import re

from nova_rdt.exporter import dashboard

LABEL_VALUES = re.compile(r"label_values\((.*), (\w+)\)")
LEGEND = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def fill(expr: str, values: dict[str, str]) -> str:
    # Longest first: $instance must not eat $instance_x.
    for k in sorted(values, key=len, reverse=True):
        expr = expr.replace(k, values[k])
    return expr


def legend(fmt: str, labels: dict) -> str:
    return LEGEND.sub(lambda m: labels.get(m.group(1), ""), fmt)


def problems(prom, doc: dict, values: dict[str, str], shared: str,
             uuids: set[str], controller: bool = False) -> list[str]:
    """What misleads in ``doc``, with two instances named ``shared`` (of
    ``uuids``, in two projects) behind ``prom``.  The runtime
    controller's panels are judged apart (``controller``: only they),
    against a Prometheus that scrapes a controller."""
    out = []
    for panel in doc["panels"]:
        for t in panel.get("targets", ()):
            if (dashboard.CONTROLLER_PREFIX in t["expr"]) != controller:
                continue
            where = f"panel {panel['title']!r} {t['refId']}"
            if "$host" not in t["expr"]:
                out.append(f"{where}: ignores the host variable: "
                           f"{t['expr']}")
            expr = fill(t["expr"], values)
            res = prom.query(expr)
            if not res:
                out.append(f"{where}: no data for {expr}")
                continue
            about_instances = 'kind="instance"' in expr
            shown = set()
            no_host, unkeyed = [], []
            for r in res:
                m = r["metric"]
                if "host" not in m:
                    no_host.append(m)
                if (about_instances or m.get("kind") == "instance"
                        or "instance_name" in m) \
                        and "instance_uuid" not in m:
                    unkeyed.append(m)
                if m.get("instance_name") == shared:
                    shown.add(m.get("instance_uuid"))
            if no_host:
                out.append(f"{where}: {len(no_host)} of {len(res)} series "
                           f"without host, e.g. {no_host[0]}, from {expr}")
            if unkeyed:
                out.append(f"{where}: {len(unkeyed)} of {len(res)} series "
                           f"not keyed by instance_uuid (instances of one "
                           f"display name merge), e.g. {unkeyed[0]}, "
                           f"from {expr}")
            if shown and shown != uuids:
                out.append(f"{where}: shows {sorted(shown)} of the "
                           f"instances named {shared!r} {sorted(uuids)}")
            legends = [legend(t.get("legendFormat", ""), r["metric"])
                       for r in res]
            dups = sorted({x for x in legends if legends.count(x) > 1})
            if dups and t.get("format") != "table":
                out.append(f"{where}: series share the legends {dups}")
    for var in () if controller else doc["templating"]["list"]:
        q = var.get("query")
        if not isinstance(q, dict):
            continue
        m = LABEL_VALUES.fullmatch(fill(q["query"], values))
        if m is None:
            out.append(f"variable {var['name']}: not label_values()")
            continue
        got = {x["metric"].get(m.group(2)) for x in prom.query(m.group(1))}
        if not got - {None}:
            out.append(f"variable {var['name']}: no values")
    return out
