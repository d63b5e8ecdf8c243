"""Hostile state records against a mounted emulator (issue 16).

``nova-rdt reconcile`` runs as root and removes the libvirt group a dead
domain's record names.  Whatever the records say, it removes only such
groups, names every record it cannot use, and finishes the run.
"""

from __future__ import annotations

import json
import os
import subprocess

from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import pytest

from nova_rdt.host.agent import Agent
from nova_rdt.host.settings import HookSettings

pytestmark = pytest.mark.fuse

FOREIGN = ("COS1", "pqos-cos2", "nova-rdtx")


def _dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def _record(uuid, pid, group):
    return {"uuid": uuid, "name": "dom", "pid": pid, "pid_start": None,
            "pmd_share": False, "rdt_class": None, "group": group}


GROUPS = st.one_of(
    st.sampled_from(["qemu-1-dom1-vcpus_0/../COS1", "../COS1", "COS1",
                     "qemu-1-dom1-vcpus_0/..", "qemu-1-dom1-vcpus_0\n",
                     "info", "mon_groups", "", "qemu-9-nothere-vcpus_0",
                     "qemu-1-dom1-vcpus_0", "/sys/fs/resctrl/COS1"]),
    st.integers(), st.none(), st.lists(st.text(max_size=3), max_size=2),
    st.text(max_size=30))


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(st.lists(GROUPS, min_size=1, max_size=5))
def test_reconcile_touches_only_recorded_libvirt_groups(emulator, tmp_path,
                                                         groups):
    root = emulator.mountpoint
    for name in FOREIGN + ("qemu-1-dom1-vcpus_0",):
        if not os.path.isdir(os.path.join(root, name)):
            os.mkdir(os.path.join(root, name))
    state = tmp_path / f"state-{len(os.listdir(tmp_path))}"
    d = state / "domains"
    d.mkdir(parents=True)
    pid = _dead_pid()
    for i, group in enumerate(groups):
        uuid = f"6f1a3c86-5b1e-4c55-9a3a-{i:012d}"
        (d / f"{uuid}.json").write_text(json.dumps(_record(uuid, pid,
                                                           group)))
    settings_ = HookSettings(resctrl_root=root, state_path=str(state),
                             sysfs_cpu_root=emulator.sysfs_cpu)
    report = Agent(settings_).reconcile()
    for name in FOREIGN:
        assert os.path.isdir(os.path.join(root, name)), name
    assert set(report.removed_groups) <= {"qemu-1-dom1-vcpus_0"}
    if "qemu-1-dom1-vcpus_0" in groups:
        assert not os.path.isdir(os.path.join(root, "qemu-1-dom1-vcpus_0"))
    handled = len(report.dropped_records) + len(report.unreadable_records)
    assert handled == len(groups)
