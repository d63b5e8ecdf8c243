"""``nova-rdt lab --scenario isolation --short`` end to end: a forwarding
VM and a noisy neighbour that Nova builds, on vhost-user ports of the
lab's OVS-DPDK, started by the lab's real libvirtd; checked from
summary.json, the per-trial OVS counters of the VM's vhost-user ports
and the domains libvirt ran, and for what is left afterwards."""

from __future__ import annotations

import glob
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET

import pytest

from tests.integration.conftest import DEFAULT_OUT
from tests.integration.conftest import lab_env
from tests.integration.conftest import skip_unless_nova_lab


def _skip():
    skip_unless_nova_lab()
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
    # From a fresh working directory with the default, relative --out,
    # as a user's first run.
    cwd = tmp_path_factory.mktemp("isolation")
    out = cwd / DEFAULT_OUT
    t0 = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "nova_rdt.cmd.main", "lab", "--scenario",
         "isolation", "--short"],
        capture_output=True, text=True, timeout=900, cwd=cwd, env=lab_env())
    elapsed = time.monotonic() - t0
    tail = (res.stdout + res.stderr)[-6000:]
    summary_path = out / "isolation" / "summary.json"
    assert summary_path.exists(), tail
    summary = json.loads(summary_path.read_text())
    return res, summary, out, tail, elapsed


LAB_DIR_RE = re.compile(r" at (/\S+)/emulator/resctrl")


def _lab_leftovers(lab_dir: str, sockets=()) -> list[str]:
    """What of a lab outlived it: its directory, a mount under it, a
    process naming it or one of its vhost-user sockets."""
    left = [lab_dir] if os.path.exists(lab_dir) else []
    with open("/proc/mounts") as f:
        left += [line.split()[1] for line in f
                 if line.split()[1].startswith(lab_dir)]
    left += [s for s in sockets if os.path.exists(s)]
    return left + _processes_mentioning([lab_dir, *sockets])


def _vhost_sockets(out) -> list[str]:
    sockets = []
    for p in glob.glob(str(out / "isolation" / "domains" / "*.xml")):
        if p.endswith(".nova.xml"):
            continue
        for src in ET.parse(p).getroot().iterfind(
                "devices/interface/source"):
            sockets.append(src.get("path"))
    return sockets


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


def test_rdt_on_had_libvirts_groups_and_their_counters_moved(run):
    res, summary, out, _tail, _e = run
    facts = summary["facts"]
    # kvm domains (KVM, or TCG under them where KVM cannot boot Linux):
    # libvirt made every group, nothing was made in its place.
    assert facts["domain_type"] == "kvm", facts
    assert facts["rdt_not_applied"] == []
    if summary["accel"] == "tcg":
        assert any("kvm domains run QEMU's TCG" in f
                   for f in facts["machine_forces"]), facts
        assert "kvm domains run QEMU's TCG" in res.stdout
    made = facts["libvirt_groups"]
    assert set(made) == {"rdt-iso-on-forwarding", "rdt-iso-on-noisy"}
    for srv, v in made.items():
        assert v["groups"] and all(re.fullmatch(
            r"qemu-\d+-instance-[0-9a-f]+-vcpus_[0-9,-]+", g)
            for g in v["groups"]), v
        # The vCPU threads QEMU reports are the group's tasks.
        assert sorted(v["tasks"][v["groups"][0]]) == sorted(v["vcpu_tids"])
        assert v["vcpus_in_tasks"] is True
        dom = ET.parse(out / "isolation" / "domains" / f"{srv}.xml")
        assert dom.getroot().get("type") == "kvm"
        assert dom.getroot().find("cputune/cachetune") is not None
    fwd = made["rdt-iso-on-forwarding"]
    pmd = dict(p.split("=") for p in fwd["pmd_l3"].split(";"))
    shared = []
    for cid, mask in fwd["schemata"][fwd["groups"][0]]["L3"].items():
        # The forwarding VM shares the PMDs' COS where the PMD cores are;
        # elsewhere the PMD COS holds the host's ways, none of the VM's.
        overlap = int(pmd[cid], 16) & int(mask, 16)
        assert overlap in (0, int(mask, 16)), (cid, pmd, mask)
        if overlap:
            shared.append(cid)
    assert all(int(pmd[c], 16) for c in pmd), pmd
    noisy = made["rdt-iso-on-noisy"]
    for cid, mask in noisy["schemata"][noisy["groups"][0]]["L3"].items():
        fmask = fwd["schemata"][fwd["groups"][0]]["L3"].get(cid, "0x0")
        assert int(mask, 16) & int(fmask, 16) == 0, (cid, mask, fmask)
    html = (out / "report.html").read_text()
    assert 'id="libvirt-groups"' in html
    counters = {(c["rdt"], c["neighbour"]): c["neighbour_load"]["counters"]
                for c in summary["conditions"]}
    assert counters[("off", "idle")]["rdt_group"] is None
    assert counters[("off", "busy")]["rdt_group"] is None
    idle, busy = counters[("on", "idle")], counters[("on", "busy")]
    assert idle["rdt_group"] == busy["rdt_group"] == noisy["groups"][0]
    # The onp profile counts occupancy (CMT) but not bandwidth.
    key = ("mbm_total_bytes_per_s"
           if busy["mbm_total_bytes_per_s"] is not None
           else "llc_occupancy_bytes")
    assert busy[key] > 0 and idle[key] <= busy[key] / 10, (idle, busy)
    verdicts = [v for v in summary["verdicts"]
                if v["check"] == "neighbour_counters" and v["rdt"] == "on"]
    assert verdicts and verdicts[0]["ok"] is True


def test_the_html_report_has_the_tables_and_the_figures(run):
    res, summary, out, _tail, _e = run
    assert summary["report"] == str(out / "report.html")
    assert f"report:  {summary['report']}" in res.stdout
    html = (out / "report.html").read_text()
    for section in ('id="table-3-2"', 'id="table-3-3"', 'id="conditions"',
                    'id="checks"'):
        assert section in html
    if summary["figures"]:
        assert html.count("data:image/png;base64,") == 2
    else:
        assert "Figures skipped" in html
    assert f"<td>{summary['forwarder']}</td>" in html


def test_nothing_left_behind(run):
    _res, summary, out, _tail, _e = run
    assert summary["left_behind"] == []
    sockets = _vhost_sockets(out)
    assert sockets
    assert not [s for s in sockets if os.path.exists(s)]
    # No QEMU (its command line names its vhost-user sockets), no OVS.
    assert not _processes_mentioning(sockets)
    lab_dirs = {os.path.dirname(os.path.dirname(os.path.dirname(s)))
                for s in sockets}
    assert not [d for d in lab_dirs if os.path.exists(d)]


def test_ctrl_c_while_measuring_stops_everything(tmp_path):
    """Ctrl-C (SIGINT to the foreground process group, as a terminal
    sends it) once the VMs run and traffic flows through them."""
    _skip()
    out = tmp_path / "report"
    errors = open(tmp_path / "stderr.txt", "w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "nova_rdt.cmd.main", "lab", "--scenario",
         "isolation", "--short", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=errors, text=True,
        start_new_session=True)
    said, lab_dir = [], None
    # A reader thread: select() on a pipe read through a buffered text
    # wrapper can miss a line already in the buffer, and the Ctrl-C
    # would then land later than the measurement it is meant for.
    lines: queue.Queue = queue.Queue()

    def read():
        for line in iter(proc.stdout.readline, ""):
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 600
    try:
        while True:
            try:
                line = lines.get(timeout=max(0.1,
                                             deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                pytest.fail("no measurement started: "
                            + "".join(said)[-3000:])
            said.append(line)
            m = LAB_DIR_RE.search(line)
            if m:
                lab_dir = m.group(1)
            if "neighbour idle: RFC 2544 at" in line:
                break
        assert proc.poll() is None, "".join(said)[-3000:]
        time.sleep(3)                       # traffic through the VM
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=300)
        reader.join(timeout=30)
        errors.seek(0)
        err = errors.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        errors.close()
    rest = ""
    while not lines.empty():
        rest += lines.get() or ""
    text = "".join(said) + rest
    assert proc.returncode == 130, text[-3000:] + err[-3000:]
    assert "interrupted; everything was stopped" in err
    assert "Traceback" not in text + err
    assert "nothing left behind" in rest
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ok"] is False and summary["left_behind"] == []
    assert lab_dir, text[-3000:]
    assert _lab_leftovers(lab_dir, _vhost_sockets(out)) == []
