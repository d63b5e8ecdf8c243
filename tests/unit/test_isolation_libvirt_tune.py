"""The lab's stand-in for libvirt's resctrl code: what it reads from QEMU
and what it says.  (The mount itself: tests/functional/
test_isolation_libvirt_tune.py, on the FUSE emulator.)"""

import json

import pytest

from nova_rdt.lab.isolation import libvirt_alloc as la
from nova_rdt.lab.isolation import libvirt_tune as lt
from nova_rdt.resctrl.schemata import Schemata


def test_vcpu_threads_from_query_cpus_fast():
    reply = {"return": [
        {"cpu-index": 0, "qom-path": "/machine/unattached/device[0]",
         "thread-id": 4242, "props": {"core-id": 0}, "target": "x86_64"},
        {"cpu-index": 1, "thread-id": 4243, "target": "x86_64"}],
        "id": "libvirt-12"}
    assert lt.vcpu_threads(json.dumps(reply)) == {0: 4242, 1: 4243}


@pytest.mark.parametrize("text", [
    "", "not json", '{"error": {"class": "CommandNotFound"}}',
    '{"return": [{"cpu-index": 0}]}', '{"return": []}'])
def test_a_reply_that_is_not_understood_is_said(text):
    with pytest.raises(lt.StandInError, match="query-cpus-fast"):
        lt.vcpu_threads(text)


def test_the_message_says_what_libvirt_would_have_done():
    a = la.Allocation("qemu-3-instance-00000003-vcpus_0-1",
                      frozenset({0, 1}), Schemata.parse("L3:0=3000;1=f"),
                      {"L3": {0: 0x3000}}, ())
    msg = lt.Applied("instance-00000003", (a,), (a.group,)).message()
    assert msg == (
        "TCG: libvirt takes <cachetune> for KVM domains only; the lab "
        "applied the allocation libvirt would have made (group "
        "qemu-3-instance-00000003-vcpus_0-1, L3 0=0x3000 (2 ways))")


def test_the_hook_runs_as_the_installed_shim_would_run_it():
    from nova_rdt.hook import install

    shim = install.render_shim("/opt/venv/bin/python3",
                               "/tmp/lab dir/hook.json")
    assert lt.shim_command(shim, ["instance-1", "reconnect", "begin",
                                  "-"]) == [
        "/opt/venv/bin/python3", "-m", "nova_rdt.hook.main", "--settings",
        "/tmp/lab dir/hook.json", "--", "instance-1", "reconnect", "begin",
        "-"]


def test_a_shim_that_is_not_nova_rdts_is_refused():
    with pytest.raises(lt.StandInError, match="NOVA_RDT_PYTHON"):
        lt.shim_command("#!/bin/sh\nexit 0\n", ["x"])
