"""The dashboard under CDP, evaluated by the real Prometheus.

An emulated Gold 6252 mounted with ``-o cdp`` (L3CODE and L3DATA), the
PMD COS and two projects' instances both named "web-1", each with its
own code and data ways, named by hook records; the exporter as its own
process; Prometheus scraping it every second.  Every dashboard query
must return data and keep the two instances apart, the way map must
show code and data rows, and the previous dashboard (whose way map read
``type="both"`` only) must fail the same check.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from nova_rdt.host import records as records_mod
from tests.functional.exporter.proc import ExporterProcess
from tests.integration import dashboard_check
from tests.integration import prometheus

pytestmark = pytest.mark.fuse

SHARED = "web-1"
PMD = "nova-rdt-pmd"
WEB = (  # group, uuid, project id, project name, code mask, data mask
    ("qemu-1-instance-00000001-vcpus_0",
     "6f1a3c86-5b1e-4c55-9a3a-0000000000a1",
     "0a1b2c3d4e5f40718293a4b5c6d7e8f9", "alpha", 0x0c, 0x30),
    ("qemu-2-instance-00000002-vcpus_0",
     "6f1a3c86-5b1e-4c55-9a3a-0000000000b2",
     "9f8e7d6c5b4a43928170f6e5d4c3b2a1", "beta", 0xc0, 0x300))
VALUES = {"$host": "cdp-compute", "$cache_id": ".*", "$project": ".*",
          "$instance": ".*", "$protected": SHARED,
          "$__rate_interval": "5s"}
DASHBOARD = os.path.join(prometheus.REPO, "etc", "grafana", "nova-rdt.json")
PREVIOUS = os.path.join(prometheus.REPO, "tests", "integration", "data",
                        "nova-rdt-dashboard-0.json")


def _layout(root: str, state_path: str) -> None:
    def schemata(group, code, data):
        with open(os.path.join(root, group, "schemata"), "w") as f:
            f.write(f"L3CODE:0={code:x};1={code:x}\n"
                    f"L3DATA:0={data:x};1={data:x}\n")

    os.mkdir(os.path.join(root, PMD))
    schemata(PMD, 0x600, 0x600)
    recs = records_mod.Records(state_path)
    for group, uuid, pid, pname, code, data in WEB:
        os.mkdir(os.path.join(root, group))
        schemata(group, code, data)
        recs.put(records_mod.Record(
            uuid=uuid, name=group.split("-", 2)[2].rsplit("-vcpus", 1)[0],
            pid=1, pid_start=None, pmd_share=True, rdt_class=None,
            group=group, instance_name=SHARED, flavor="nfv.fwd",
            project_id=pid, project_name=pname))


@pytest.fixture(scope="module")
def cdp_stack(tmp_path_factory):
    reason = prometheus.unavailable_reason()
    if reason:
        pytest.skip(reason)
    from nova_rdt.emulator import mount

    reason = mount.fuse_unavailable_reason()
    if reason:
        pytest.skip(f"FUSE emulator unavailable: {reason}")
    emu = mount.Emulator("gold-6252-cdp")
    emu.start()
    exp = prom = None
    try:
        state = str(tmp_path_factory.mktemp("state"))
        _layout(emu.mountpoint, state)
        exp = ExporterProcess(emu.mountpoint, emu.sysfs_cpu, state,
                              host="cdp-compute").start()
        prom = prometheus.Prometheus(
            str(tmp_path_factory.mktemp("prometheus")),
            [exp.url.split("//", 1)[1]], "cdp-compute").start()
        deadline = time.monotonic() + 30
        while not prom.query(
                "count_over_time(nova_rdt_clos_used[5s]) > 3"):
            assert time.monotonic() < deadline, prom.log()
            time.sleep(0.5)
        yield prom
    finally:
        if prom:
            prom.stop()
        if exp:
            exp.stop()
        emu.stop()


def test_every_query_under_cdp_keeps_the_two_web_1_apart(cdp_stack):
    prom = cdp_stack
    with open(DASHBOARD) as f:
        doc = json.load(f)
    uuids = {w[1] for w in WEB}
    assert dashboard_check.problems(prom, doc, VALUES, SHARED, uuids) == []


def test_the_way_map_shows_code_and_data_ways(cdp_stack):
    prom = cdp_stack
    with open(DASHBOARD) as f:
        doc = json.load(f)
    (panel,) = [p for p in doc["panels"] if p["title"].startswith(
        "L3 way map")]
    res = prom.query(dashboard_check.fill(panel["targets"][0]["expr"],
                                          VALUES))
    rows = {(r["metric"].get("instance_uuid"), r["metric"]["type"],
             r["metric"]["cache_id"], int(r["metric"]["way"]))
            for r in res if r["metric"].get("instance_name") == SHARED}
    for _g, uuid, _p, _n, code, data in WEB:
        for typ, mask in (("code", code), ("data", data)):
            ways = {w for w in range(11) if mask >> w & 1}
            assert {w for u, t, c, w in rows
                    if (u, t, c) == (uuid, typ, "0")} == ways


def test_the_previous_dashboards_way_map_is_empty_under_cdp(cdp_stack):
    prom = cdp_stack
    with open(PREVIOUS) as f:
        doc = json.load(f)
    found = dashboard_check.problems(prom, doc, VALUES, SHARED,
                                     {w[1] for w in WEB})
    assert any(p.startswith("panel 'L3 way map over time' A: no data")
               for p in found), found
