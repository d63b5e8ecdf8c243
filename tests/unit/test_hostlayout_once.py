"""The host layout is worked out once per hardware and settings (issue
38), and a cached answer is the one a fresh computation gives."""

from __future__ import annotations

import dataclasses

import pytest

from nova_rdt.allocation import hostlayout
from nova_rdt.emulator import topology
from nova_rdt.resctrl.groups import Resctrl
from tests.kernel_fixtures import make_kernel
from tests.kernel_fixtures import materialize


@pytest.fixture
def caps(tmp_path):
    k, _, _ = make_kernel("gold-6252")
    root = materialize(k, str(tmp_path / "r"))
    cpu = topology.write_tree(k.profile, str(tmp_path / "cpu"))
    return Resctrl(root, sysfs_cpu=cpu).capabilities()


def test_the_layout_is_worked_out_once_per_settings(caps, monkeypatch):
    hostlayout._PLANS.clear()
    calls = []
    real = hostlayout._plan
    monkeypatch.setattr(hostlayout, "_plan",
                        lambda *a: calls.append(a) or real(*a))
    first = hostlayout.plan(caps, 2, 2)
    assert hostlayout.plan(caps, 2, 2) is first
    # Another reading of the same hardware is the same key.
    assert hostlayout.plan(dataclasses.replace(caps), 2, 2) is first
    assert len(calls) == 1
    other = hostlayout.plan(caps, 3, 2)
    assert len(calls) == 2 and other != first
    assert first == real(caps, 2, 2) and other == real(caps, 3, 2)


def test_a_refused_layout_is_refused_every_time(caps, monkeypatch):
    hostlayout._PLANS.clear()
    for _ in range(2):
        with pytest.raises(hostlayout.HostPrepError,
                           match=r"reserved_host_ways=10 \+ "
                                 r"pmd_shared_ways=2"):
            hostlayout.plan(caps, 10, 2)


def test_other_hardware_is_another_layout(caps):
    smaller = dataclasses.replace(caps, cache={
        name: dataclasses.replace(r, cbm_mask=r.cbm_mask >> 3)
        for name, r in caps.cache.items()})
    assert hostlayout.plan(smaller, 2, 2).managed_ways == \
        hostlayout.plan(caps, 2, 2).managed_ways - 3
