"""The exporter on the Host lab, scraped by a real Prometheus.

An emulated Gold 6252 (MBM and CMT) with a one-way PMD COS, libvirt
running the nova-rdt hook (whose records name the instances), two
running instances with their own ways and a class member; the exporter in
this process; Prometheus
scraping it every second with the sample alert rules loaded.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from nova_rdt.host import prep as hostprep
from tests.functional.exporter.proc import ExporterProcess
from tests.integration import hooklab
from tests.integration import prometheus
from tests.integration.conftest import finish_lab
from tests.integration.conftest import lab_skip_reason
from tests.integration.conftest import start_lab

WAY_KIB = 3328


# Half busy: enough CPU time to move the emulated counters, little enough
# to leave the 2-core machine to the lab.
BURN = ("import time\n"
        "while True:\n"
        "    t = time.monotonic() + 0.01\n"
        "    while time.monotonic() < t: pass\n"
        "    time.sleep(0.01)\n")

@pytest.fixture(scope="module")
def stack(libvirt_cache, tmp_path_factory):
    reason = lab_skip_reason(libvirt=True) or prometheus.unavailable_reason()
    if reason:
        pytest.skip(reason)
    lab = start_lab(profile="gold-6252", ovs=False,
                    libvirt_cache_dir=libvirt_cache,
                    hook={"reserved_host_ways": 3,
                          "classes": ["low_priority:l3_ways=1,mb=10"]})
    prom = exporter = None
    burners: list[subprocess.Popen] = []
    try:
        lab.start()
        # A PMD COS of one way (no OVS here: it holds no CPUs).
        hostprep.prepare(hooklab.fs(lab), reserved_ways=3, pmd_ways=1)
        for name, nova in (("fwd0", ("fwd-0", "nfv.fwd")),
                           ("fwd1", ("fwd-1", "nfv.fwd"))):
            lab.libvirt.define(hooklab.managed_domain(
                lab, name, cache_kib=2 * WAY_KIB, nova=nova))
            lab.libvirt.start_domain(name)
        lab.libvirt.define(hooklab.managed_domain(
            lab, "noisy", rdt_class="low_priority",
            nova=("noisy-0", "be.small")))
        lab.libvirt.start_domain("noisy")
        settings = lab.hook_settings(host_view=True)
        hooklab.eventually(lambda: len(
            __import__("os").listdir(settings.state_path + "/domains")) == 3)
        # The guests are diskless and idle, and the emulator's bandwidth
        # follows real CPU time: give each group a task that works.
        fs = hooklab.fs(lab)
        hooklab.eventually(lambda: any(
            g.name == "nova-rdt-class-low_priority" for g in fs.groups()))
        for group in (hooklab.group_of(lab, "fwd0"),
                      hooklab.group_of(lab, "fwd1"),
                      "nova-rdt-class-low_priority"):
            burner = subprocess.Popen([sys.executable, "-c", BURN])
            burners.append(burner)
            with open(f"{lab.resctrl_root}/{group}/tasks", "w") as f:
                f.write(f"{burner.pid}\n")
        exporter = ExporterProcess(lab.resctrl_root, lab.sysfs_cpu_root,
                                   settings.state_path, host="lab-compute")
        exporter.start()
        prom = prometheus.Prometheus(
            str(tmp_path_factory.mktemp("prometheus")),
            [exporter.url.split("//", 1)[1]], "lab-compute").start()
        yield lab, prom
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
        if prom:
            prom.stop()
        if exporter:
            exporter.stop()
        finish_lab(lab)


def _eventually(prom, promql, check, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        result = prom.query(promql)
        if check(result):
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{promql}: {result}\n{prom.log()}")
        time.sleep(0.5)


def test_prometheus_gets_per_instance_occupancy(stack):
    _lab, prom = stack
    res = _eventually(
        prom, 'sum by (instance_name, flavor) '
              '(nova_rdt_llc_occupancy_bytes{kind="instance"})',
        lambda r: {x["metric"]["instance_name"] for x in r}
        >= {"fwd-0", "fwd-1"} and all(float(x["value"][1]) > 0 for x in r))
    assert {x["metric"]["flavor"] for x in res} == {"nfv.fwd"}


def test_bandwidth_rate_is_non_zero_for_a_group_with_tasks(stack):
    _lab, prom = stack
    res = _eventually(
        prom, 'sum by (instance_name) (rate('
              'nova_rdt_memory_bandwidth_total_bytes_total'
              '{instance_name="fwd-0"}[5s]))',
        lambda r: r and float(r[0]["value"][1]) > 0)
    assert float(res[0]["value"][1]) > 1e6
    cls = _eventually(
        prom, 'sum by (group) (rate(nova_rdt_memory_bandwidth_total_bytes_'
              'total{kind="class"}[5s]))',
        lambda r: r and float(r[0]["value"][1]) > 0)
    assert cls[0]["metric"]["group"] == "nova-rdt-class-low_priority"


def test_allocation_and_clos_series(stack):
    lab, prom = stack
    ways = _eventually(
        prom, 'nova_rdt_group_l3_ways{kind="instance",cache_id="0"}',
        lambda r: len(r) == 2)
    assert {float(x["value"][1]) for x in ways} == {2.0}
    used = _eventually(prom, "nova_rdt_clos_used", lambda r: bool(r))
    # root, the PMD COS, two instances and the class group
    assert float(used[0]["value"][1]) == 5
    free = prom.query('nova_rdt_cache_ways_free{cache_id="0"}')
    assert float(free[0]["value"][1]) == 11 - 3 - 1 - 2 - 2 - 1


def test_sample_alert_rules_load_and_evaluate(stack):
    _lab, prom = stack
    deadline = time.monotonic() + 20
    while True:
        groups = prom.api("rules")["groups"]
        rules = [r for g in groups for r in g["rules"]]
        if rules and all(r.get("lastEvaluation", "").startswith("2")
                         and r["health"] == "ok" for r in rules):
            break
        assert time.monotonic() < deadline, rules
        time.sleep(0.5)
    assert {r["name"] for r in rules} == {
        "NovaRdtInstanceOccupancyFarBelowAllocation",
        "NovaRdtClassBandwidthHigh", "NovaRdtClosNearlyExhausted",
        "NovaRdtExporterReadErrors"}


def test_every_dashboard_query_runs_and_finds_data(stack):
    """Each panel and variable query of etc/grafana/nova-rdt.json, with its
    variables filled in, is valid PromQL with data behind it."""
    import json
    import os
    import re

    from nova_rdt.exporter import dashboard

    _lab, prom = stack
    with open(os.path.join(prometheus.REPO, "etc", "grafana",
                           "nova-rdt.json")) as f:
        exprs = dashboard.queries(json.load(f))
    values = {"$host": "lab-compute", "$cache_id": ".*", "$instance": ".*",
              "$protected": "fwd-0", "$__rate_interval": "5s"}
    # Let rate() windows fill.
    _eventually(prom, "count_over_time(nova_rdt_clos_used[5s]) > 3",
                lambda r: bool(r))
    empty = []
    for expr in exprs:
        if dashboard.CONTROLLER_PREFIX in expr:
            continue        # served by nova-rdt controller, not running here
        for k, v in values.items():
            expr = expr.replace(k, v)
        m = re.fullmatch(r"label_values\((.*), (\w+)\)", expr)
        if m:
            res = prom.query(m.group(1))
            if not any(m.group(2) in x["metric"] for x in res):
                empty.append(expr)
            continue
        if not prom.query(expr):
            empty.append(expr)
    assert not empty, empty
