"""The lab leaves nothing behind: processes, mounts, namespaces, links.

Each test starts a whole lab (libvirt with a running guest, OVS-DPDK with
PMDs, veths in a traffic namespace, testpmd behind vhost-user), breaks
it in some way, and checks from outside the lab's own bookkeeping that
everything it made is gone.
"""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from nova_rdt.lab import LabError
from nova_rdt.lab import diskless_domain_xml
from tests.integration.conftest import _ACTIVE_LABS
from tests.integration.conftest import lab_skip_reason
from tests.integration.conftest import start_lab


class Boom(Exception):
    pass


@pytest.fixture
def full_lab(libvirt_cache):
    reason = lab_skip_reason(libvirt=True, ovs=True, vnf=True)
    if reason:
        pytest.skip(reason)
    lab = start_lab(libvirt_cache_dir=libvirt_cache)
    yield lab
    lab.stop()
    if lab in _ACTIVE_LABS:
        _ACTIVE_LABS.remove(lab)


def _start_everything(lab):
    lab.start(traffic_ports=2, vnf=True)
    lab.libvirt.define(diskless_domain_xml(
        "teardown", domain_type=lab.libvirt.domain_type,
        cputune="<cachetune vcpus='0'><cache id='0' level='3' type='both' "
                "size='3328' unit='KiB'/></cachetune>"))
    # Give libvirt room: the default group keeps the lower 3 ways.
    with open(os.path.join(lab.resctrl_root, "schemata"), "w") as f:
        f.write("L3:0=7;1=7\n")
    lab.libvirt.start_domain("teardown")
    return {
        "pids": [p.pid for p in lab.sup.procs] + lab.libvirt.qemu_pids(),
        "netns": lab.traffic.name,
        "links": [h for h, _ in lab.traffic.pairs],
        "base": lab.base,
        "ns_inode": lab.ns.ns_inode,
    }


def _assert_nothing_left(made):
    for pid in made["pids"]:
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rpartition(")")[2].split()[0]
        except OSError:
            continue
        # An orphan's zombie waits for init to reap it: it is not running.
        assert state == "Z", f"pid {pid} still running"
    ip = subprocess.run(["ip", "netns", "list"], capture_output=True,
                        text=True, check=True).stdout
    assert made["netns"] not in ip
    links = subprocess.run(["ip", "-o", "link"], capture_output=True,
                           text=True, check=True).stdout
    for link in made["links"]:
        assert f" {link}:" not in links and f" {link}@" not in links
    with open("/proc/self/mountinfo") as f:
        assert made["base"] not in f.read()
    assert not os.path.exists(made["base"])
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                inode = os.stat(f"/proc/{pid}/ns/mnt").st_ino
            except OSError:
                continue
            assert inode != made["ns_inode"], f"pid {pid} in lab namespace"


def test_failed_test_still_tears_down(full_lab):
    made = None
    with pytest.raises(Boom):
        with full_lab:
            made = _start_everything(full_lab)
            assert len(made["pids"]) >= 7  # holder, daemons, testpmd, QEMU
            raise Boom
    assert full_lab.leaks() == []
    assert full_lab.swept == []
    _assert_nothing_left(made)
    full_lab.stop()  # idempotent
    assert full_lab.leaks() == []


def test_dead_libvirtd_leaves_no_guest_behind(full_lab):
    made = _start_everything(full_lab)
    qemu = full_lab.libvirt.qemu_pids()
    assert qemu
    os.kill(full_lab.libvirt.libvirtd.pid, signal.SIGKILL)
    full_lab.stop()
    # Orphaned QEMU can only be found through the namespace: it is swept.
    assert any(s.startswith("qemu") for s in full_lab.swept), \
        full_lab.swept
    assert full_lab.leaks() == []
    _assert_nothing_left(made)


def test_start_failure_names_the_step_and_keeps_logs(full_lab, tmp_path):
    # DPDK still initialises in 1 MB, but no port gets its mbufs.
    full_lab.ovs.dpdk_memory_mb = 1
    full_lab.failure_log_dir = str(tmp_path)
    with pytest.raises(LabError) as err:
        full_lab.start(traffic_ports=1)
    message = str(err.value)
    assert "lab start failed while adding traffic port p0" in message
    assert "OVS refused port p0" in message
    kept = tmp_path / f"lab-{full_lab.id}"
    assert str(kept) in message
    assert "could not add network device p0" in \
        (kept / "ovs" / "ovs-vswitchd.log").read_text()
    assert (kept / "libvirt" / "log" / "libvirtd.log").exists()
    assert full_lab.stopped
    assert full_lab.leaks() == []
