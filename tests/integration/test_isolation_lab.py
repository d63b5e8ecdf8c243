"""``nova-rdt lab --scenario isolation --short`` end to end: a forwarding
VM and a noisy neighbour that Nova builds, on vhost-user ports of the
lab's OVS-DPDK, started by the lab's real libvirtd; checked from
summary.json, the per-trial OVS counters of the VM's vhost-user ports
and the domains libvirt ran, and for what is left afterwards."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from tests.integration.conftest import lab_skip_reason


def _skip():
    reason = lab_skip_reason(libvirt=True, ovs=True)
    if reason:
        pytest.skip(reason)
    try:
        import nova.tests.functional.libvirt.base  # noqa: F401
    except ImportError as e:
        pytest.skip(f"Nova's functional framework is not importable: {e}")
    from nova_rdt.lab.guest import image as guest_image
    try:
        guest_image.load()
    except guest_image.ImageError as e:
        pytest.skip(f"no guest image: {e}")
    if not os.path.exists("/dev/kvm") and not _has_tcg():
        pytest.skip("neither KVM nor TCG")


def _has_tcg() -> bool:
    import shutil
    return shutil.which("qemu-system-x86_64") is not None


def _processes_mentioning(paths) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(p in cmd for p in paths):
            found.append(f"{pid}: {cmd[:160]}")
    return found


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    _skip()
    out = tmp_path_factory.mktemp("isolation") / "report"
    t0 = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "nova_rdt.cmd.main", "lab", "--scenario",
         "isolation", "--short", "--out", str(out)],
        capture_output=True, text=True, timeout=900)
    elapsed = time.monotonic() - t0
    tail = (res.stdout + res.stderr)[-6000:]
    summary_path = out / "isolation" / "summary.json"
    assert summary_path.exists(), tail
    summary = json.loads(summary_path.read_text())
    return res, summary, out, tail, elapsed


def test_it_ran_and_said_what_ran(run):
    res, summary, _out, tail, _elapsed = run
    assert res.returncode == 0, tail
    assert summary["ok"] is True, tail
    assert summary["accel"] in ("kvm", "tcg")
    assert summary["forwarder"] in ("testpmd", "kernel")
    assert summary["rdt"] == "emulated"
    assert f"forwarder {summary['forwarder']}" in res.stdout
    assert "not enforced by hardware" in " ".join(summary["notes"]) or \
        "no hardware enforces" in " ".join(summary["notes"])


def test_four_conditions_and_frames_crossed_the_vm_in_each(run):
    _res, summary, _out, tail, _e = run
    conds = {(c["rdt"], c["neighbour"]): c for c in summary["conditions"]}
    assert set(conds) == {("off", "idle"), ("off", "busy"),
                          ("on", "idle"), ("on", "busy")}, tail
    for key, c in conds.items():
        received = sum(f["received"] for f in c["frames"])
        assert received > 0, key
        # Every frame the receiver got entered and left the guest.
        assert c["vm_ports"]["rx"] >= received, (key, c["vm_ports"])
        assert c["vm_ports"]["tx"] >= received, (key, c["vm_ports"])


def test_ovs_counters_account_for_every_trial(run):
    _res, summary, _out, _tail, _e = run
    trials = summary["ovs_trials"]
    assert len(trials) >= 4
    for t in trials:
        # Frames that came back crossed the VM's vhost-user ports both
        # ways; the VM saw no more than the generator sent (a trial's
        # stragglers may land in the next one, hence the totals below).
        assert t["vm_rx"] >= t["gen_rx"], t
        assert t["vm_tx"] >= t["gen_rx"], t
    assert sum(t["vm_rx"] for t in trials) <= sum(t["gen_tx"]
                                                  for t in trials)


def test_the_neighbour_was_busy_only_when_it_should_be(run):
    _res, summary, _out, _tail, _e = run
    loads = {(c["rdt"], c["neighbour"]): c["neighbour_load"]
             for c in summary["conditions"]}
    settings = summary["settings"]
    for (rdt, neighbour), load in loads.items():
        assert load["cpu_share"] is not None, (rdt, neighbour)
        if neighbour == "busy":
            assert load["cpu_share"] >= settings["busy_min_cpu_share"]
        else:
            assert load["cpu_share"] <= settings["idle_max_cpu_share"]


def test_the_domains_were_novas_on_vhost_user(run):
    _res, _summary, out, _tail, _e = run
    xmls = sorted(glob.glob(str(out / "isolation" / "domains" / "*.xml")))
    ran = [p for p in xmls if not p.endswith(".nova.xml")]
    assert len(ran) == 4, xmls
    fwd = [ET.parse(p).getroot() for p in ran if "forwarding" in p]
    assert len(fwd) == 2
    for dom in fwd:
        nics = dom.findall("devices/interface")
        assert [n.get("type") for n in nics] == ["vhostuser"] * 2
        assert dom.find("memoryBacking/access").get("mode") == "shared"
        assert dom.findall("cputune/vcpupin")
        assert dom.find("os/kernel") is not None


def test_nothing_left_behind(run):
    _res, summary, out, _tail, _e = run
    assert summary["left_behind"] == []
    sockets = []
    for p in glob.glob(str(out / "isolation" / "domains" / "*.xml")):
        if p.endswith(".nova.xml"):
            continue
        for src in ET.parse(p).getroot().iterfind(
                "devices/interface/source"):
            sockets.append(src.get("path"))
    assert sockets
    assert not [s for s in sockets if os.path.exists(s)]
    # No QEMU (its command line names its vhost-user sockets), no OVS.
    assert not _processes_mentioning(sockets)
    lab_dirs = {os.path.dirname(os.path.dirname(os.path.dirname(s)))
                for s in sockets}
    assert not [d for d in lab_dirs if os.path.exists(d)]
