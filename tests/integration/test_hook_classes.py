"""Class groups, reconciliation and hostile input, with the real hook.

An emulated Gold 6252 (11 ways, 16 CLOS, MBA) with 3 OS ways, libvirt
running the installed nova-rdt hook, and a class ``low_priority`` of one
way and MB 10%, as in the noisy-neighbour scenarios.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from nova_rdt.lab import diskless_domain_xml
from tests.integration import hooklab
from tests.integration.conftest import prepared_lab

CLASS_GROUP = "nova-rdt-class-low_priority"


@pytest.fixture(scope="module")
def lab(libvirt_cache):
    yield from prepared_lab(
        libvirt_cache, reserved_ways=3, profile="gold-6252",
        hook={"reserved_host_ways": 3,
              "classes": ["low_priority:l3_ways=1,mb=10"]})


def _closids_used(lab) -> int:
    return 1 + sum(1 for g in os.listdir(lab.resctrl_root)
                   if os.path.isfile(os.path.join(lab.resctrl_root, g,
                                                  "schemata"))
                   and g not in ("info",))


def _qemu_tids(lab, name: str) -> set[int]:
    with open(os.path.join(lab.libvirt.dirs["run"], "qemu",
                           f"{name}.pid")) as f:
        pid = int(f.read())
    return {int(t) for t in os.listdir(f"/proc/{pid}/task")}


def test_three_class_members_share_one_clos(lab, guests):
    before = _closids_used(lab)
    for i in range(3):
        name = f"noisy{i}"
        guests.append(name)
        lab.libvirt.define(hooklab.managed_domain(
            lab, name, rdt_class="low_priority"))
        lab.libvirt.start_domain(name)
    tasks = hooklab.eventually(lambda: (
        set(hooklab.fs(lab).group(CLASS_GROUP).tasks())
        if os.path.isdir(os.path.join(lab.resctrl_root, CLASS_GROUP))
        else set()) >= set().union(*(_qemu_tids(lab, f"noisy{i}")
                                     for i in range(3))) and True)
    assert tasks
    assert _closids_used(lab) == before + 1
    s = hooklab.schemata(lab, CLASS_GROUP)
    assert bin(s.get("L3", 0)).count("1") == 1
    assert s.get("L3", 0) & hooklab.schemata(lab).get("L3", 0) == 0
    assert s.get("MB", 0) == 10 and s.get("MB", 1) == 10
    tasks = set(hooklab.fs(lab).group(CLASS_GROUP).tasks())
    for i in range(3):
        assert _qemu_tids(lab, f"noisy{i}") <= tasks
    assert hooklab.hook_errors(lab) == []

    lab.libvirt.destroy("noisy0")
    lab.libvirt.destroy("noisy1")
    time.sleep(0.5)  # give a wrong removal the chance to happen
    assert os.path.isdir(os.path.join(lab.resctrl_root, CLASS_GROUP))
    lab.libvirt.destroy("noisy2")
    # The last member left: the class group is gone.
    hooklab.eventually(lambda: not os.path.exists(
        os.path.join(lab.resctrl_root, CLASS_GROUP)))
    assert _closids_used(lab) == before


def test_reconcile_after_crashes_touches_nothing_foreign(lab, guests):
    guests.extend(["fwd", "noisy", "foreign"])
    lab.libvirt.define(hooklab.managed_domain(lab, "fwd", cache_kib=3328))
    lab.libvirt.define(hooklab.managed_domain(lab, "noisy",
                                              rdt_class="low_priority"))
    # A domain nova-rdt does not manage, and a group pqos made.
    lab.libvirt.define(diskless_domain_xml(
        "foreign", domain_type=lab.libvirt.domain_type,
        cputune="<cachetune vcpus='0'><cache id='1' level='3' type='both' "
                "size='3328' unit='KiB'/></cachetune>"))
    for name in ("fwd", "noisy", "foreign"):
        lab.libvirt.start_domain(name)
    # Wait for the hook to have recorded both managed domains.
    hooklab.eventually(lambda: len(os.listdir(
        os.path.join(lab.state_path, "domains"))) == 2)
    os.mkdir(os.path.join(lab.resctrl_root, "COS1"))
    try:
        fwd_group = hooklab.group_of(lab, "fwd")
        foreign_group = hooklab.group_of(lab, "foreign")
        # Crash: libvirtd dies, then fwd's and noisy's QEMU.
        os.kill(lab.libvirt.libvirtd.pid, signal.SIGKILL)
        lab.libvirt.libvirtd.popen.wait()
        for name in ("fwd", "noisy"):
            with open(os.path.join(lab.libvirt.dirs["run"], "qemu",
                                   f"{name}.pid")) as f:
                os.kill(int(f.read()), signal.SIGKILL)
        time.sleep(0.5)
        assert os.path.isdir(os.path.join(lab.resctrl_root, fwd_group))

        report = lab.agent().reconcile()
        assert report.removed_groups == [fwd_group, CLASS_GROUP]
        assert len(report.dropped_records) == 2
        groups = set(os.listdir(lab.resctrl_root))
        assert fwd_group not in groups and CLASS_GROUP not in groups
        assert {foreign_group, "COS1"} <= groups     # untouched
        # Reconcile again: nothing left to do.
        again = lab.agent().reconcile()
        assert again.removed_groups == [] and again.dropped_records == []
    finally:
        os.rmdir(os.path.join(lab.resctrl_root, "COS1"))
        lab.restart_libvirt()


HOSTILE = [
    (["../../x", "started", "begin", "-"],
     b"<domain><name>../../x</name></domain>", "unsafe domain name"),
    (["$(reboot)", "started", "begin", "-"],
     b"<domain><name>$(reboot)</name><uuid>nope</uuid></domain>",
     "is not a uuid"),
    (["vm", "started", "begin", "-"], b"<domain><name>vm</nam",
     "does not parse"),
    (["vm", "started", "begin", "-"],
     b'<!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/shadow">]>'
     b"<domain><name>&x;</name></domain>", "DOCTYPE"),
    (["vm", "started", "begin", "-"],
     b"<domain><name>other</name></domain>", "does not match"),
]


@pytest.mark.parametrize("argv,xml,message", HOSTILE)
@pytest.mark.parametrize("strict", [False, True])
def test_hostile_hook_input(lab, tmp_path, argv, xml, message, strict):
    settings = lab.hook_settings()
    log = tmp_path / "hook.log"
    settings = type(settings)(**{**settings.__dict__, "log_file": str(log),
                                 "hook_strict": strict})
    path = tmp_path / "hook.json"
    settings.dump(str(path))
    before = sorted(os.listdir(lab.resctrl_root))
    state_before = sorted(os.walk(lab.state_path))
    res = subprocess.run(
        lab.ns.command([sys.executable, "-m", "nova_rdt.hook.main",
                        "--settings", str(path), "--", *argv]),
        input=xml, capture_output=True, cwd=str(tmp_path), timeout=30)
    assert res.returncode == (1 if strict else 0), res.stderr
    text = log.read_text()
    assert "refused input" in text and message in text, text
    assert sorted(os.listdir(lab.resctrl_root)) == before
    assert sorted(os.walk(lab.state_path)) == state_before
    assert sorted(os.listdir(tmp_path)) == ["hook.json", "hook.log"]


def test_unknown_operation_and_unmanaged_domains_are_ignored(lab, tmp_path):
    cases = [(["vm", "frobnicate", "-", "-"], b"junk"),
             (["vm", "started", "begin", "-"],
              b"<domain><name>vm</name>"
              b"<uuid>6f1a3c86-5b1e-4c55-9a3a-1b2c3d4e5f60</uuid></domain>")]
    for argv, xml in cases:
        res = subprocess.run(
            [sys.executable, "-m", "nova_rdt.hook.main", "--", *argv],
            input=xml, capture_output=True, cwd=str(tmp_path), timeout=30)
        assert res.returncode == 0 and res.stderr == b"", res.stderr


def test_strict_hook_stops_a_start_it_cannot_isolate(lab, guests):
    """hook_strict: a class this host does not define fails the start at
    ``prepare``, before QEMU runs; nothing is left behind."""
    from nova_rdt.lab.libvirtd import VirshError

    shim = os.path.join(lab.libvirt.hooks_dir, "qemu.d", "nova-rdt")
    with open(shim) as f:
        original = f.read()
    strict_json = os.path.join(lab.base, "hook-strict.json")
    settings = lab.hook_settings()
    type(settings)(**{**settings.__dict__, "hook_strict": True}).dump(
        strict_json)
    assert "NOVA_RDT_STRICT=0" in original
    strict = original.replace("NOVA_RDT_STRICT=0", "NOVA_RDT_STRICT=1") \
        .replace(lab.hook_settings_path, strict_json)
    before = sorted(os.listdir(lab.resctrl_root))
    guests.append("unknown-class")
    lab.libvirt.define(hooklab.managed_domain(lab, "unknown-class",
                                              rdt_class="no_such_class"))
    try:
        # libvirt execs the hook afresh at each event: no restart needed.
        with open(shim, "w") as f:
            f.write(strict)
        with pytest.raises(VirshError, match="[Hh]ook"):
            lab.libvirt.start_domain("unknown-class")
    finally:
        with open(shim, "w") as f:
            f.write(original)
    assert "unknown-class" not in lab.libvirt.domains(running_only=True)
    assert sorted(os.listdir(lab.resctrl_root)) == before
    errors = hooklab.hook_errors(lab)
    assert any("no_such_class" in e and "not defined" in e for e in errors)
    # Not strict again: the same domain starts, without its class.
    lab.libvirt.start_domain("unknown-class")
