"""The Grafana dashboard, generated from code.

    python -m nova_rdt.exporter.dashboard > etc/grafana/nova-rdt.json

A test keeps the committed JSON equal to this output, and checks that
every query names a metric the exporter serves and runs in a real
Prometheus, against two projects whose instances share a display name:
every series is keyed by host and instance uuid, so none merges them.

Written as plain data rather than with grafanalib or Grafana's
foundation SDK: the dashboard is a dozen panels, the JSON model is what
Grafana stores and what the tests read, and a library would add a
dependency without removing a line that matters.
"""

from __future__ import annotations

import json
import sys

DS = {"type": "prometheus", "uid": "${datasource}"}
HOST = 'host=~"$host"'
RATE = "[$__rate_interval]"


def _target(expr: str, legend: str, ref: str = "A", **kw) -> dict:
    return {"datasource": DS, "expr": expr, "legendFormat": legend,
            "refId": ref, **kw}


def _panel(pid: int, title: str, kind: str, grid: tuple, targets: list,
           unit: str | None = None, description: str = "",
           **extra) -> dict:
    x, y, w, h = grid
    p = {"id": pid, "title": title, "type": kind, "datasource": DS,
         "description": description,
         "gridPos": {"x": x, "y": y, "w": w, "h": h}, "targets": targets,
         "fieldConfig": {"defaults": {}, "overrides": []}, "options": {}}
    if unit:
        p["fieldConfig"]["defaults"]["unit"] = unit
    p.update(extra)
    return p


def _var(name: str, query: str, label: str, multi: bool = True) -> dict:
    return {"name": name, "label": label, "type": "query", "datasource": DS,
            "query": {"query": query, "refId": f"{name}-var"},
            "definition": query, "refresh": 2, "multi": multi,
            "includeAll": True, "allValue": ".*", "sort": 1,
            "current": {"selected": True, "text": "All", "value": "$__all"}}


# An instance is keyed by host and uuid; display and project names ride
# along for the legend only (tenants choose them, they are not unique).
INSTANCE_KEY = "host, instance_uuid, instance_name, project_id, project_name"
INSTANCE_LEGEND = "{{instance_name}} [{{project_name}}] {{instance_uuid}}"
# Exporters and controllers, as etc/prometheus/prometheus.yml names them.
JOBS = 'job=~"nova-rdt|nova-rdt-controller"'


def build() -> dict:
    inst = (f'{HOST},kind="instance",project_name=~"$project",'
            f'instance_name=~"$instance"')
    bw = "nova_rdt_memory_bandwidth_bytes_total"
    key = INSTANCE_KEY
    panels = [
        _panel(1, "L3 way map over time", "state-timeline", (0, 0, 24, 9), [
            # No aggregation: every series is one way of one owner, under
            # CDP one per type (code, data).
            _target(f'nova_rdt_way_owner{{{HOST},cache_id=~"$cache_id"}}',
                    "{{host}} cache {{cache_id}} {{type}} way {{way}}: "
                    "{{kind}} {{instance_name}} {{group}}")],
            description="One row per way, cache type and owner: where each "
                        "group's ways lie, the PMD COS overlapping the "
                        "instances that share with it.  Under CDP the "
                        "code and data masks are rows of their own."),
        _panel(2, "L3 occupancy per instance", "timeseries", (0, 9, 12, 8), [
            _target(f"sum by ({key}) "
                    f"(nova_rdt_llc_occupancy_bytes{{{inst}}})",
                    INSTANCE_LEGEND),
            # Under CDP code and data masks cover the same ways: the larger
            # of the two per cache id, not their sum.
            _target(f"sum by ({key}) (max by ({key}, cache_id) "
                    f"(nova_rdt_group_l3_ways{{{inst}}} * on (host, "
                    f"cache_id, type) group_left nova_rdt_cache_way_bytes))",
                    INSTANCE_LEGEND + " allocated", "B")],
            unit="bytes"),
        _panel(3, "Memory bandwidth per instance and the PMD COS",
               "timeseries", (12, 9, 12, 8), [
                   _target(f"sum by ({key}) (rate({bw}{{{inst}}}{RATE}))",
                           INSTANCE_LEGEND),
                   _target(f'sum by (host) (rate({bw}{{{HOST},kind="pmd"}}'
                           f'{RATE}))', "PMD COS {{host}}", "B")],
               unit="Bps"),
        _panel(4, "Free L3 ways per cache id", "timeseries", (0, 17, 12, 7), [
            _target(f"nova_rdt_cache_ways_free{{{HOST}}}",
                    "{{host}} cache {{cache_id}} {{type}} free"),
            _target(f"nova_rdt_cache_ways_largest_free_run{{{HOST}}}",
                    "{{host}} cache {{cache_id}} {{type}} largest run",
                    "B")],
            unit="short"),
        _panel(5, "CLOS per host", "timeseries", (12, 17, 12, 7), [
            _target(f"nova_rdt_clos_used{{{HOST}}}", "{{host}} used"),
            _target(f"nova_rdt_clos_free{{{HOST}}}", "{{host}} free", "B")],
            unit="short"),
        _panel(6, "Noisy neighbours: top memory-bandwidth consumers",
               "bargauge", (0, 24, 12, 9), [
                   _target(f"topk(5, sum by (host, kind, group, "
                           f"instance_uuid, instance_name, project_name) "
                           f"(rate({bw}{{{HOST},kind!=\"host\"}}{RATE})))",
                           "{{host}} {{kind}} {{instance_name}} "
                           "[{{project_name}}] {{group}}",
                           instant=True)],
               unit="Bps",
               options={"orientation": "horizontal",
                        "reduceOptions": {"calcs": ["lastNotNull"]}}),
        _panel(7, "Protected instances: L3 occupancy", "timeseries",
               (12, 24, 12, 9), [
                   _target(f'sum by ({key}) (nova_rdt_llc_occupancy_'
                           f'bytes{{{HOST},kind="instance",'
                           f'instance_name=~"$protected"}})',
                           INSTANCE_LEGEND)],
               unit="bytes",
               description="A protected (forwarding) instance's occupancy "
                           "should hold steady while the neighbours on the "
                           "left pull bandwidth."),
        _panel(16, "Degraded: what nova-rdt cannot repair", "state-timeline",
               (0, 33, 12, 7), [
                   _target(f"max by (host, reason) "
                           f"(nova_rdt_degraded{{{HOST}}})",
                           "{{host}} {{reason}}")],
               description="1 while a reason holds (see the recovery "
                           "page); alert NovaRdtDegraded fires after 5 "
                           "minutes."),
        _panel(17, "Exporter and controller up", "state-timeline",
               (12, 33, 12, 7), [
                   _target(f"up{{{JOBS},{HOST}}}",
                           "{{job}} {{host}} ({{instance}})")],
               description="Prometheus's up for each nova-rdt scrape "
                           "target; alerts NovaRdtExporterDown and "
                           "NovaRdtControllerDown fire after 5 minutes "
                           "at 0."),
        _panel(8, "RDT features and exporter health", "table",
               (0, 40, 24, 6), [
                   _target(f"nova_rdt_feature_available{{{HOST}}}",
                           "{{host}} {{feature}}", instant=True,
                           format="table"),
                   _target(f"rate(nova_rdt_scrape_errors_total{{{HOST}}}"
                           f"{RATE})", "{{host}} errors", "B", instant=True),
                   _target(f"nova_rdt_resctrl_available{{{HOST}}}",
                           "{{host}} available {{reason}}", "C",
                           instant=True)]),
    ] + controller_panels(y=46)
    inst_var = f'{HOST},kind="instance",project_name=~"$project"'
    return {
        "title": "nova-rdt: Intel RDT per host and instance",
        "uid": "nova-rdt", "schemaVersion": 39, "version": 2,
        "editable": True, "tags": ["openstack", "nova", "rdt"],
        "time": {"from": "now-1h", "to": "now"}, "refresh": "30s",
        "templating": {"list": [
            {"name": "datasource", "label": "Prometheus", "type": "datasource",
             "query": "prometheus", "current": {}},
            _var("host", "label_values(nova_rdt_resctrl_available, host)",
                 "Host"),
            _var("cache_id", f"label_values(nova_rdt_cache_ways_total"
                             f"{{{HOST}}}, cache_id)", "Cache id"),
            _var("project", f'label_values(nova_rdt_group_tasks'
                            f'{{{HOST},kind="instance"}}, project_name)',
                 "Project"),
            _var("instance", f"label_values(nova_rdt_group_tasks"
                             f"{{{inst_var}}}, instance_name)",
                 "Instance (display name: every instance so named)"),
            _var("protected", f"label_values(nova_rdt_group_tasks"
                              f"{{{inst_var}}}, instance_name)",
                 "Protected instances"),
        ]},
        "panels": panels,
    }


# Served by ``nova-rdt controller`` (nova_rdt.controller.metrics), not by
# the exporter; empty where no controller runs.
CONTROLLER_PREFIX = "nova_rdt_controller_"


def controller_panels(y: int) -> list[dict]:
    """The runtime controller's row: MB and ways of each best-effort
    class against its static values, decisions by reason, and the
    bandwidth and SLO it acts on."""
    c = CONTROLLER_PREFIX
    return [
        {"id": 9, "type": "row", "title": "Runtime controller "
         "(nova-rdt controller)", "collapsed": False, "panels": [],
         "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}},
        _panel(10, "Best-effort class MB (static dashed)", "timeseries",
               (0, y + 1, 12, 8), [
                   _target(f"{c}class_mb{{{HOST}}}", "{{host}} {{class}}"),
                   _target(f"{c}class_static_mb{{{HOST}}}",
                           "{{host}} {{class}} static", "B")],
               description="MB the controller set for each class, and "
                           "the flavor/[rdt] classes value it returns to."),
        _panel(11, "Best-effort class L3 ways (static dashed)",
               "timeseries", (12, y + 1, 12, 8), [
                   _target(f"{c}class_l3_ways{{{HOST}}}",
                           "{{host}} {{class}}"),
                   _target(f"{c}class_static_l3_ways{{{HOST}}}",
                           "{{host}} {{class}} static", "B")]),
        _panel(12, "Decisions per minute by reason", "timeseries",
               (0, y + 9, 12, 8), [
                   _target(f"sum by (host, reason, outcome) "
                           f"(rate({c}decisions_total{{{HOST}}}{RATE})) "
                           f"* 60",
                           "{{host}} {{reason}} {{outcome}}")]),
        _panel(13, "Bandwidth: best-effort classes and protected "
                   "instances", "timeseries", (12, y + 9, 12, 8), [
                   _target(f"{c}class_bandwidth_bytes{{{HOST}}}",
                           "{{host}} {{class}}"),
                   _target(f"{c}protected_bandwidth_bytes{{{HOST}}}",
                           "{{host}} {{instance}} (protected)", "B")],
               unit="Bps"),
        _panel(14, "SLO signal against its target", "timeseries",
               (0, y + 17, 24, 7), [
                   _target(f"{c}slo_value{{{HOST}}}", "{{host}} {{instance}}"),
                   _target(f"{c}slo_target{{{HOST}}}",
                           "{{host}} {{instance}} target", "B")]),
    ]


def queries(doc: dict) -> list[str]:
    """Every PromQL expression in the dashboard, variables included."""
    out = [t["expr"] for p in doc["panels"] for t in p.get("targets", ())]
    out += [v["query"]["query"] for v in doc["templating"]["list"]
            if isinstance(v.get("query"), dict)]
    return out


def main() -> int:
    json.dump(build(), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
