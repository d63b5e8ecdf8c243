"""The controller's loop against the mounted emulator (the kernel's rules,
errno and last_cmd_status), in-process: the slack policy from a file SLO
source moves MB and ways; dry run writes nothing; protected and foreign
groups are never written; restarts keep the first static values."""

from __future__ import annotations

import os

import pytest

from nova_rdt.controller import daemon
from nova_rdt.controller import model as m
from nova_rdt.controller import policy as pol
from nova_rdt.controller import sources
from nova_rdt.controller import state as state_mod
from nova_rdt.emulator import mount
from nova_rdt.resctrl import cbm
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.resctrl.schemata import Schemata

CLASS = "nova-rdt-class-lp"
PROT = "qemu-3-prot-vcpus_0"


@pytest.fixture(scope="module")
def emulated():
    reason = mount.fuse_unavailable_reason()
    if reason:
        pytest.skip(f"FUSE emulator unavailable: {reason}")
    with mount.Emulator("gold-6252-cdp") as emu:
        yield emu


@pytest.fixture
def fs(emulated):
    root = emulated.mountpoint
    for name in os.listdir(root):
        if name.startswith(("nova-rdt-", "qemu-", "COS")):
            os.rmdir(os.path.join(root, name))
    fs = Resctrl(root, sysfs_cpu=emulated.sysfs_cpu)
    caps = fs.capabilities()
    full = cbm.full_mask(caps.cache["L3CODE"].cbm_len)
    fs.write_schemata(fs.root_group(), Schemata(
        {r: {0: 0x3, 1: 0x3} for r in ("L3CODE", "L3DATA")}),
        allow_root=True)
    g = fs.create_group(CLASS)
    fs.write_schemata(g, Schemata({"L3CODE": {0: 0x3c, 1: 0x78},
                                   "L3DATA": {0: 0x7c, 1: 0x78},
                                   "MB": {0: 100, 1: 100}}))
    os.mkdir(os.path.join(root, PROT))
    with open(os.path.join(root, PROT, "schemata"), "w") as f:
        f.write(f"L3CODE:0={full & ~0x7f:x};1={full & ~0x7f:x}\n"
                f"L3DATA:0={full & ~0x7f:x};1={full & ~0x7f:x}\n")
    # A foreign group with every way (pqos' default), there before the
    # controller: sharing with it is the class's static state.
    os.mkdir(os.path.join(root, "COS9"))
    return fs


def read(fs, name):
    with open(os.path.join(fs.root, name, "schemata")) as f:
        return Schemata.parse(f.read())


def controller(fs, tmp_path, slo_file, dry_run=False):
    src = sources.FileSource(str(slo_file), max_age=0)
    return daemon.Controller(
        fs, pol.SlackPolicy(), m.Bounds(mb_min=10, mb_step=30, ways_min=1),
        str(tmp_path / "controller.json"),
        protected=[daemon.Protected(PROT, src, 1.0)], dry_run=dry_run,
        min_interval=0, raise_hold=1)


def test_slack_policy_moves_mb_and_ways_inside_static(fs, tmp_path):
    slo = tmp_path / "p99"
    static = read(fs, CLASS)
    prot = read(fs, PROT)
    root = read(fs, "")
    ctl = controller(fs, tmp_path, slo)
    slo.write_text("2.0\n")                       # a violation
    acts = ctl.step()
    assert [(a.mb, a.ways, a.reason, a.applied) for a in acts] == \
        [(10, 1, m.SLO_VIOLATED, True)]
    s = read(fs, CLASS)
    assert s.get("MB", 0) == 10 and s.get("MB", 1) == 10
    # Three ways (static 4 - 1) taken from the top of every mask: the
    # 5-way L3DATA mask of cache 0 keeps two.
    assert s.domains("L3CODE") == {0: 0x4, 1: 0x8}
    assert s.domains("L3DATA") == {0: 0xc, 1: 0x8}
    assert "ok" in fs.last_cmd_status()
    # The state file knew the static values before the write.
    st = state_mod.load(str(tmp_path / "controller.json"))
    assert Schemata(st.groups[CLASS].static) == static
    # Slack again: ways come back first, then MB, a step a period.
    slo.write_text("0.2\n")
    seen = []
    for _ in range(12):
        ctl.step()
        seen.append(read(fs, CLASS))
    assert seen[-1] == static
    for s in seen:
        for r in ("L3CODE", "L3DATA"):
            for d, v in s.domains(r).items():
                assert v & ~static.get(r, d) == 0
                cbm.check(v, 11, 1, False)
    # Never written: the protected group, the root.
    assert read(fs, PROT) == prot and read(fs, "") == root


def test_dry_run_writes_nothing(fs, tmp_path):
    slo = tmp_path / "p99"
    slo.write_text("5\n")
    before = read(fs, CLASS)
    ctl = controller(fs, tmp_path, slo, dry_run=True)
    acts = ctl.step()
    assert acts and all(a.applied for a in acts)
    assert read(fs, CLASS) == before


def test_no_signal_no_decision_and_restart_keeps_static(fs, tmp_path):
    slo = tmp_path / "p99"                        # never written
    static = read(fs, CLASS)
    ctl = controller(fs, tmp_path, slo)
    assert ctl.step() == []
    slo.write_text("3\n")
    ctl.step()
    lowered = read(fs, CLASS)
    assert lowered != static
    # A crash (no restore), then a new controller: it takes the static
    # values from the state file, not the lowered ones it finds.
    ctl.state.pid = 1 << 22                     # "dead"
    state_mod.save(ctl.state_path, ctl.state)
    again = controller(fs, tmp_path, slo)
    slo.write_text("0.1\n")
    for _ in range(12):
        again.step()
    assert read(fs, CLASS) == static
    assert again.restore() == [CLASS]


def test_never_takes_back_ways_another_group_got(fs, tmp_path):
    slo = tmp_path / "p99"
    ctl = controller(fs, tmp_path, slo)
    slo.write_text("2\n")
    ctl.step()                                    # down to one way
    low = read(fs, CLASS)
    # libvirt sees the freed ways as free and gives one to a new VM.
    newcomer = "qemu-5-new-vcpus_0"
    os.mkdir(os.path.join(fs.root, newcomer))
    with open(os.path.join(fs.root, newcomer, "schemata"), "w") as f:
        f.write("L3CODE:0=10;1=10\nL3DATA:0=10;1=10\n")
    slo.write_text("0.1\n")
    for _ in range(12):
        ctl.step()
    s = read(fs, CLASS)
    assert s.get("MB", 0) == 100                  # MB came back
    for r in ("L3CODE", "L3DATA"):
        assert s.domains(r) == low.domains(r)     # ways did not
    # Nor does a restore after a crash.
    ctl.state.running = True
    ctl.state.pid = 1 << 22
    state_mod.save(ctl.state_path, ctl.state)
    assert state_mod.restore(fs, ctl.state_path) == [CLASS]
    s = read(fs, CLASS)
    for r in ("L3CODE", "L3DATA"):
        assert s.domains(r) == low.domains(r)


def test_restore_after_a_crash_gives_back_ways_shared_from_the_start(
        fs, tmp_path):
    slo = tmp_path / "p99"
    static = read(fs, CLASS)
    ctl = controller(fs, tmp_path, slo)
    slo.write_text("2\n")
    ctl.step()
    assert read(fs, CLASS) != static
    # Killed: the file still says running, the pid is gone.  COS9 held
    # every way before the controller came: not a reason to hold back.
    ctl.state.pid = 1 << 22
    state_mod.save(ctl.state_path, ctl.state)
    assert state_mod.restore(fs, ctl.state_path) == [CLASS]
    assert read(fs, CLASS) == static
