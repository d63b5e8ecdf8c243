"""The exporter over the FUSE emulator: metrics, robustness, references."""

from __future__ import annotations

import json
import os
import re
import shutil
import urllib.request

import pytest
import yaml

from nova_rdt.exporter import dashboard
from tests.functional.exporter import onp
from tests.functional.exporter.proc import ExporterProcess

pytestmark = pytest.mark.fuse

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
METRIC = re.compile(r"\b(nova_rdt_[a-z0-9_]+)")


def _serve(root, sysfs, state=None):
    return ExporterProcess(root, sysfs, state).start()


def _get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, r.read().decode()


def _samples(text, hosts=None):
    """{(name, frozenset(labels)): value} of an exposition; the ``host``
    label (the same on every series) is left out of the keys and, when
    ``hosts`` is a set, collected there."""
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        m = re.match(r"^([a-z0-9_]+)(?:\{(.*)\})? (\S+)$", line)
        pairs = re.findall(r'(\w+)="([^"]*)"', m.group(2) or "")
        if hosts is not None:
            hosts.add(dict(pairs).get("host"))
        labels = frozenset(p for p in pairs if p[0] != "host")
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def _copy(src, dst):
    # resctrl files report size 0, as kernfs does: read, do not copy_file.
    with open(src) as f, open(dst, "w") as g:
        g.write(f.read())


def _served_names(text):
    """Names in # TYPE lines (the text format gives counters' _total
    there) and in samples."""
    names = {line.split()[2] for line in text.splitlines()
             if line.startswith("# TYPE ")}
    return names | {name for name, _labels in _samples(text)}


@pytest.mark.parametrize("emulator", ["e5-2658-v3"], indirect=True)
def test_onp_layout_metrics(emulator, tmp_path):
    onp.write_layout(emulator.mountpoint, str(tmp_path))
    exp = _serve(emulator.mountpoint, emulator.sysfs_cpu,
                               str(tmp_path))
    try:
        status, text = _get(exp.url + "/metrics")
    finally:
        exp.stop()
    assert status == 200
    s = _samples(text)

    def ways(group):
        hits = [v for (n, lab), v in s.items() if n == "nova_rdt_group_l3_ways"
                and ("group", group) in lab and ("cache_id", "0") in lab]
        assert len(hits) == 1, group
        return hits[0]

    assert ways("/") == 4 and ways(onp.PMD[0]) == 16
    assert ways(onp.VM0[0]) == ways(onp.VM1[0]) == 8
    vm0 = [lab for (n, lab) in s if n == "nova_rdt_group_l3_mask"
           and ("group", onp.VM0[0]) in lab]
    assert ("instance_name", "vm0") in vm0[0]
    assert ("kind", "instance") in vm0[0] and ("flavor", "nfv.fwd") in vm0[0]
    assert s[("nova_rdt_clos_used", frozenset())] == 4
    assert s[("nova_rdt_clos_free", frozenset())] == 0
    assert s[("nova_rdt_cache_ways_free",
              frozenset({("cache_id", "1"), ("type", "both")}))] == 0
    # The way map: way 4 is held by the PMD COS and vm1, nobody else.
    owners = {dict(lab)["group"] for (n, lab) in s
              if n == "nova_rdt_way_owner" and ("way", "4") in lab
              and ("cache_id", "0") in lab}
    assert owners == {onp.PMD[0], onp.VM1[0]}
    assert s[("nova_rdt_feature_available",
              frozenset({("feature", "mbm_total")}))] == 0   # Haswell: CMT
    assert s[("nova_rdt_feature_available",
              frozenset({("feature", "cmt")}))] == 1


def test_every_dashboard_and_alert_query_names_a_served_metric(emulator):
    exp = _serve(emulator.mountpoint, emulator.sysfs_cpu)
    try:
        _status, text = _get(exp.url + "/metrics")
    finally:
        exp.stop()
    served = _served_names(text)
    with open(os.path.join(REPO, "etc", "grafana", "nova-rdt.json")) as f:
        exprs = dashboard.queries(json.load(f))
    with open(os.path.join(REPO, "etc", "prometheus",
                           "nova-rdt-alerts.yml")) as f:
        exprs += [r["expr"] for g in yaml.safe_load(f)["groups"]
                  for r in g["rules"]]
    used = {m for e in exprs for m in METRIC.findall(e)
            if not m.startswith(dashboard.CONTROLLER_PREFIX)}
    assert used and used <= served, used - served


def test_controller_panels_name_metrics_the_controller_serves():
    from nova_rdt.controller import metrics as controller_metrics

    mt = controller_metrics.Metrics("h", "slack", False)
    mt.set_class("nova-rdt-class-lp", 30, 100, 2, 4, 1.5e8)
    mt.count("nova-rdt-class-lp", "slo_violated", "applied")
    mt.slo["vm"] = (0.9, 1.0)
    mt.protected_bandwidth["vm"] = 1e9
    served = _served_names(mt.render())
    with open(os.path.join(REPO, "etc", "grafana", "nova-rdt.json")) as f:
        exprs = dashboard.queries(json.load(f))
    used = {m for e in exprs for m in METRIC.findall(e)
            if m.startswith(dashboard.CONTROLLER_PREFIX)}
    assert len(used) >= 7
    assert used <= served, used - served


def test_committed_dashboard_is_the_generated_one():
    with open(os.path.join(REPO, "etc", "grafana", "nova-rdt.json")) as f:
        assert json.load(f) == json.loads(json.dumps(dashboard.build()))


def test_a_host_without_rdt_says_so(tmp_path):
    exp = _serve(str(tmp_path / "nothing"), str(tmp_path))
    try:
        status, text = _get(exp.url + "/metrics")
        _s2, layout = _get(exp.url + "/api/layout")
        _s3, page = _get(exp.url + "/")
    finally:
        exp.stop()
    assert status == 200
    s = _samples(text)
    avail = [(lab, v) for (n, lab), v in s.items()
             if n == "nova_rdt_resctrl_available"]
    assert len(avail) == 1 and avail[0][1] == 0
    assert "no resctrl filesystem" in dict(avail[0][0])["reason"]
    # The previous release's name, served for one more release.
    assert [(lab, v) for (n, lab), v in s.items()
            if n == "nova_rdt_rdt_available"] == avail
    assert all(v == 0 for (n, _l), v in s.items()
               if n == "nova_rdt_feature_available")
    doc = json.loads(layout)
    assert doc["available"] is False and "no resctrl" in doc["error"]
    assert "no-rdt" in page


def test_unavailable_and_reset_counters_never_break_a_scrape(emulator,
                                                             tmp_path):
    # A copy of the emulated tree (info/, groups, mon_data) whose counter
    # files the test can set to what the kernel may print.
    os.mkdir(os.path.join(emulator.mountpoint, "g1"))
    root = str(tmp_path / "resctrl")
    shutil.copytree(emulator.mountpoint, root, copy_function=_copy)
    mon = os.path.join(root, "g1", "mon_data", "mon_L3_00")

    def put(event, text):
        with open(os.path.join(mon, event), "w") as f:
            f.write(text + "\n")

    put("mbm_total_bytes", "1000000")
    exp = _serve(root, emulator.sysfs_cpu)
    key = ("nova_rdt_memory_bandwidth_bytes_total", frozenset({
        ("group", "g1"), ("kind", "foreign"), ("instance_uuid", ""),
        ("instance_name", ""), ("project_id", ""), ("project_name", ""),
        ("flavor", ""), ("node", "0")}))
    try:
        _get(exp.url + "/metrics")
        put("mbm_total_bytes", "3000000")
        assert _samples(_get(exp.url + "/metrics")[1])[key] == 2000000
        put("mbm_total_bytes", "Unavailable")
        put("llc_occupancy", "Error")
        status, text = _get(exp.url + "/metrics")
        s = _samples(text)
        assert status == 200 and key not in s
        assert s[("nova_rdt_readings_unavailable_total", frozenset())] >= 2
        assert not [lab for (n, lab) in s
                    if n == "nova_rdt_llc_occupancy_bytes"
                    and ("group", "g1") in lab and ("cache_id", "0") in lab]
        # The group was recreated (a fresh RMID counts from near zero):
        # the exported counter must not go backwards.
        put("mbm_total_bytes", "500")
        assert _samples(_get(exp.url + "/metrics")[1])[key] == 2000000
        put("mbm_total_bytes", "1500")
        assert _samples(_get(exp.url + "/metrics")[1])[key] == 2001000
        _s, layout = _get(exp.url + "/api/layout")
        assert json.loads(layout)["available"] is True
    finally:
        exp.stop()


@pytest.mark.parametrize("emulator", ["e5-2658-v3"], indirect=True)
def test_every_series_carries_novas_host(emulator, tmp_path):
    """The collector over the emulated ONP layout, labelled with the host
    Nova's [DEFAULT] host gives."""
    from prometheus_client import CollectorRegistry
    from prometheus_client import generate_latest

    from nova_rdt.exporter import hostname
    from nova_rdt.exporter.live import LiveView
    from nova_rdt.exporter.metrics import RdtCollector
    from nova_rdt.exporter.sample import Sampler
    from nova_rdt.resctrl.groups import Resctrl

    onp.write_layout(emulator.mountpoint, str(tmp_path))
    conf = tmp_path / "nova.conf"
    conf.write_text("[DEFAULT]\nhost = compute-onp.example.org\n")
    host = hostname.nova_host([str(conf)])
    assert host == "compute-onp.example.org"
    live = LiveView(Sampler(Resctrl(emulator.mountpoint,
                                    sysfs_cpu=emulator.sysfs_cpu),
                            str(tmp_path)))
    registry = CollectorRegistry()
    registry.register(RdtCollector(live, host))
    text = generate_latest(registry).decode()
    hosts = set()
    s = _samples(text, hosts)
    assert len(s) > 50
    assert hosts == {"compute-onp.example.org"}     # every series
    assert s[("nova_rdt_clos_used", frozenset())] == 4
