"""The exporter on the Host lab, scraped by a real Prometheus.

An emulated Gold 6252 (MBM and CMT) with a one-way PMD COS, libvirt
running the nova-rdt hook (whose records name the instances), a cloud of
two projects whose instances share the display name "web-1" (each with
its own ways) and a class member; the exporter as operators run it;
Prometheus scraping it every second with the sample alert rules loaded.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from nova_rdt.exporter import dashboard
from nova_rdt.host import prep as hostprep
from tests.functional.exporter.proc import ExporterProcess
from tests.integration import dashboard_check
from tests.integration import hooklab
from tests.integration import prometheus
from tests.integration.conftest import finish_lab
from tests.integration.conftest import lab_skip_reason
from tests.integration.conftest import start_lab

WAY_KIB = 3328
SHARED = "web-1"
# Nova's owner projects (Keystone ids are 32 hex characters).
ALPHA = ("0a1b2c3d4e5f40718293a4b5c6d7e8f9", "alpha")
BETA = ("9f8e7d6c5b4a43928170f6e5d4c3b2a1", "beta")
PREVIOUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                        "nova-rdt-dashboard-0.json")


def _owned(xml: str, project: tuple[str, str]) -> str:
    """``xml`` with Nova's <nova:owner>, as Nova's driver writes it."""
    pid, name = project
    return xml.replace(
        "</nova:instance>",
        f'<nova:owner><nova:user uuid="{"1" * 32}">alice</nova:user>'
        f'<nova:project uuid="{pid}">{name}</nova:project></nova:owner>'
        f"</nova:instance>", 1)


def _uuid(xml: str) -> str:
    return re.search(r"<uuid>([^<]+)</uuid>", xml).group(1)


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
        uuids = {}
        for name, project in (("web1a", ALPHA), ("web1b", BETA)):
            xml = _owned(hooklab.managed_domain(
                lab, name, cache_kib=2 * WAY_KIB,
                nova=(SHARED, "nfv.fwd")), project)
            uuids[name] = _uuid(xml)
            lab.libvirt.define(xml)
            lab.libvirt.start_domain(name)
        lab.libvirt.define(_owned(hooklab.managed_domain(
            lab, "noisy", rdt_class="low_priority",
            nova=("noisy-0", "be.small")), ALPHA))
        lab.libvirt.start_domain("noisy")
        settings = lab.hook_settings(host_view=True)
        hooklab.eventually(lambda: len(
            __import__("os").listdir(settings.state_path + "/domains")) == 3)
        # The guests are diskless and idle, and the emulator's bandwidth
        # follows real CPU time: give each group a task that works.
        fs = hooklab.fs(lab)
        hooklab.eventually(lambda: any(
            g.name == "nova-rdt-class-low_priority" for g in fs.groups()))
        for group in (hooklab.group_of(lab, "web1a"),
                      hooklab.group_of(lab, "web1b"),
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
        yield lab, prom, uuids
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


def _ready(prom):
    """rate() windows filled: a few scrapes in."""
    _eventually(prom, "count_over_time(nova_rdt_clos_used[5s]) > 3",
                lambda r: bool(r))


def test_two_projects_web_1_are_two_instances(stack):
    _lab, prom, uuids = stack
    res = _eventually(
        prom, 'sum by (instance_uuid, instance_name, project_id, '
              'project_name, flavor) (nova_rdt_llc_occupancy_bytes'
              '{kind="instance"})',
        lambda r: {x["metric"].get("instance_uuid") for x in r}
        >= set(uuids.values()) and all(float(x["value"][1]) > 0
                                       for x in r))
    web = {x["metric"]["instance_uuid"]: x["metric"] for x in res
           if x["metric"]["instance_name"] == SHARED}
    assert {u: (m["project_id"], m["project_name"], m["flavor"])
            for u, m in web.items()} == {
        uuids["web1a"]: ALPHA + ("nfv.fwd",),
        uuids["web1b"]: BETA + ("nfv.fwd",)}


def test_bandwidth_rate_is_non_zero_for_a_group_with_tasks(stack):
    _lab, prom, uuids = stack
    res = _eventually(
        prom, 'sum by (instance_uuid) (rate('
              'nova_rdt_memory_bandwidth_bytes_total'
              f'{{instance_uuid="{uuids["web1a"]}"}}[5s]))',
        lambda r: r and float(r[0]["value"][1]) > 0)
    assert float(res[0]["value"][1]) > 1e6
    cls = _eventually(
        prom, 'sum by (group) (rate(nova_rdt_memory_bandwidth_bytes_'
              'total{kind="class"}[5s]))',
        lambda r: r and float(r[0]["value"][1]) > 0)
    assert cls[0]["metric"]["group"] == "nova-rdt-class-low_priority"
    # The previous release's name, still served: the same counter.
    old = _eventually(
        prom, "sum(nova_rdt_memory_bandwidth_total_bytes_total) - "
              "sum(nova_rdt_memory_bandwidth_bytes_total)",
        lambda r: bool(r))
    assert float(old[0]["value"][1]) == 0


def test_allocation_and_clos_series(stack):
    _lab, prom, _uuids = stack
    ways = _eventually(
        prom, 'nova_rdt_group_l3_ways{kind="instance",cache_id="0"}',
        lambda r: len(r) == 2)
    assert {float(x["value"][1]) for x in ways} == {2.0}
    used = _eventually(prom, "nova_rdt_clos_used", lambda r: bool(r))
    # root, the PMD COS, two instances and the class group
    assert float(used[0]["value"][1]) == 5
    free = prom.query('nova_rdt_cache_ways_free{cache_id="0"}')
    assert float(free[0]["value"][1]) == 11 - 3 - 1 - 2 - 2 - 1
    mb = _eventually(prom, 'nova_rdt_group_mb_ratio{kind="class"}',
                     lambda r: bool(r))
    assert {float(x["value"][1]) for x in mb} == {0.1}


def test_sample_alert_rules_load_and_evaluate(stack):
    _lab, prom, _uuids = stack
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
        "NovaRdtExporterReadErrors", "NovaRdtDegraded",
        "NovaRdtExporterDown", "NovaRdtControllerDown"}


VALUES = {"$host": "lab-compute", "$cache_id": ".*", "$project": ".*",
          "$instance": ".*", "$protected": SHARED,
          "$__rate_interval": "5s"}


def test_no_dashboard_panel_merges_two_projects_instances(stack):
    """Every query of etc/grafana/nova-rdt.json, its variables filled in,
    returns data from the real exporter through the real Prometheus, and
    none merges the two projects' "web-1", drops host, or gives two
    series one legend."""
    _lab, prom, uuids = stack
    _ready(prom)
    with open(os.path.join(prometheus.REPO, "etc", "grafana",
                           "nova-rdt.json")) as f:
        doc = json.load(f)
    assert dashboard_check.problems(prom, doc, VALUES, SHARED,
                                    set(uuids.values())) == []
    projects = prom.query('count by (project_name) (nova_rdt_group_tasks'
                          '{kind="instance",host=~"lab-compute"})')
    assert {x["metric"]["project_name"] for x in projects} == {
        "alpha", "beta"}


def test_the_check_fails_the_previous_dashboard(stack):
    """The same check on the dashboard before issue 31 (panels by
    display name): it finds the merge, so the check can fail."""
    _lab, prom, uuids = stack
    _ready(prom)
    with open(PREVIOUS) as f:
        doc = json.load(f)
    found = dashboard_check.problems(prom, doc, VALUES, SHARED,
                                     set(uuids.values()))
    print("\n".join(found))     # shown with pytest -rP
    merged = [p for p in found if "instances of one display name merge"
              in p]
    assert any("L3 occupancy per instance" in p for p in merged), found
    assert any("without host" in p and "Noisy neighbours" in p
               for p in found), found
    assert any("ignores the host variable: nova_rdt_feature_available"
               in p for p in found), found


def test_every_dashboard_query_names_a_served_metric(stack):
    _lab, prom, _uuids = stack
    _ready(prom)
    with open(os.path.join(prometheus.REPO, "etc", "grafana",
                           "nova-rdt.json")) as f:
        exprs = dashboard.queries(json.load(f))
    names = set(prom.api("label/__name__/values"))
    used = {m for e in exprs for m in re.findall(r"\b(nova_rdt_\w+)", e)
            if not m.startswith(dashboard.CONTROLLER_PREFIX)}
    assert used and used <= names, used - names
