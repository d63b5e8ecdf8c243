"""RFC 2544 with the software generator across real OVS-DPDK.

veth → OVS-DPDK (net_af_packet ports, a real PMD thread, a fixed
p0 ↔ p1 cross-connect) → veth, all in the Host lab's traffic namespace;
run through ``nova-rdt rfc2544 run`` as an operator would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from nova_rdt.rfc2544.generators.software import cpus_beside
from tests.integration.conftest import finish_lab
from tests.integration.conftest import lab_skip_reason
from tests.integration.conftest import start_lab

ARTIFACTS = os.environ.get("NOVA_RDT_ARTIFACTS", "/tmp/nova-rdt-artifacts")


@pytest.fixture(scope="module")
def lab():
    reason = lab_skip_reason(ovs=True)
    if reason:
        pytest.skip(reason)
    lab = start_lab(profile="gold-6252", libvirt=False)
    try:
        lab.start(traffic_ports=2)
        lab.ovs.cross_connect("p0", "p1")
    except BaseException:
        finish_lab(lab)
        raise
    yield lab
    finish_lab(lab)


def test_short_rfc2544_across_ovs_dpdk(lab, tmp_path):
    out = tmp_path / "report"
    cfg = {"label": "ovs-dpdk", "frame_sizes": [64, 512, 1518],
           "loss_tolerance": 0.001, "resolution": 0.02,
           "trial_duration": 1.0, "probe_duration": 0.5, "max_trials": 12,
           "latency_duration": 1.0, "latency_load": 0.9,
           "generator": {"type": "software",
                         "tx_interface": lab.traffic.pairs[0][1],
                         "rx_interface": lab.traffic.pairs[1][1],
                         "netns": lab.traffic.name,
                         "max_rate_pps": 1_000_000,
                         # Off the PMD's core, which it would starve.
                         "cpus": cpus_beside(lab.ovs.pmd_cpu_mask)}}
    path = tmp_path / "rfc2544.yaml"
    path.write_text(yaml.safe_dump(cfg))
    res = subprocess.run(
        [sys.executable, "-m", "nova_rdt.cmd.main", "rfc2544", "run",
         "--config", str(path), "--out", str(out)],
        capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    # Progress names the frame size, trial and rate as it goes.
    assert "[64 B] trial 1: offered 1,000,000 pps" in res.stdout
    assert "[1518 B] throughput" in res.stdout

    doc = json.loads((out / "report.json").read_text())
    assert doc["throughput_kind"].startswith("partial drop rate")
    assert [f["frame_size"] for f in doc["frames"]] == [64, 512, 1518]
    for f in doc["frames"]:
        t, lat = f["throughput"], f["latency"]
        assert t["achieved_pps"] > 10_000, f
        # Every bound is a rate really sent: none above the most sent.
        sent = max(x["achieved_pps"] for x in t["trial_log"])
        assert t["upper_pps"] is None or t["upper_pps"] <= sent
        # Whatever the path did, the result says it in words.
        if t["status"] != "ok":
            assert t["mark"].split(" ")[0].rstrip(":") in res.stdout
        assert lat["samples"] > 100, f
        assert 0 < lat["percentiles_us"]["50"] <= lat["percentiles_us"]["99"]
        assert sum(b["count"] for b in lat["bins"]) == lat["samples"]
    assert doc["generator"] == "software (native sender)" or \
        "Python sender" in res.stderr
    for name in ("results.csv", "trials.csv", "latency.png",
                 "histogram.png", "report.html"):
        assert (out / name).stat().st_size > 0, name
    assert (out / "latency.png").read_bytes()[:4] == b"\x89PNG"
    keep = os.path.join(ARTIFACTS, "rfc2544-ovs-dpdk")
    shutil.rmtree(keep, ignore_errors=True)
    shutil.copytree(out, keep)
    print(res.stdout)
