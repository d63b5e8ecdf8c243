"""The hook's side of decided placement, on the FUSE emulator (gold-6252:
11 ways on each of 2 cache ids, host ways 0-1, PMD base 9-10).

libvirt's allocator puts a domain at the lowest free ways that fit; the
hook then writes the masks nova-rdt decided (carried in the domain's
metadata) when they are safe, and places a domain that carries none
itself (issue 33, case 13: one sharer used to fill the host).
"""

from __future__ import annotations

import os
import subprocess
import uuid as uuid_mod

import pytest

from nova_rdt import naming
from nova_rdt.emulator import mount as emu_mount
from nova_rdt.hook import hookinput
from nova_rdt.host import prep
from nova_rdt.host.agent import Agent
from nova_rdt.host.settings import HookSettings
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.resctrl.schemata import Schemata
from nova_rdt.virt import config as rdt_config

PREFIX = "nova-rdt-"
PMD = naming.pmd_group(PREFIX)


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    reason = emu_mount.fuse_unavailable_reason()
    if reason:
        pytest.skip(f"FUSE emulator unavailable: {reason}")
    emu = emu_mount.Emulator("gold-6252", state_dir=str(
        tmp_path_factory.mktemp("emu")))
    emu.start()
    yield emu
    emu.stop()


class Host:
    """The emulated host and real processes standing in for QEMU; the
    test plays libvirt (its allocator's choice is given)."""

    def __init__(self, workdir, emu):
        self.root = emu.mountpoint
        self.run_dir = os.path.join(workdir, "run")
        os.makedirs(self.run_dir)
        self.settings = HookSettings(
            resctrl_root=self.root, sysfs_cpu_root=emu.sysfs_cpu,
            state_path=os.path.join(workdir, "state"),
            libvirt_qemu_run_dir=self.run_dir, pmd_cos=True,
            pmd_shared_ways=2, reserved_host_ways=2,
            ovsdb_connection=f"unix:{workdir}/no-ovsdb.sock")
        self.fs = Resctrl(self.root, prefix=PREFIX, sysfs_cpu=emu.sysfs_cpu)
        self.procs = []
        self.ids = 0

    def clear(self):
        for p in self.procs:
            p.kill()
            p.wait()
        for name in os.listdir(self.root):
            if os.path.isfile(os.path.join(self.root, name, "schemata")):
                os.rmdir(os.path.join(self.root, name))
        with open(os.path.join(self.root, "schemata"), "w") as f:
            f.write("L3:0=7ff;1=7ff\n")

    def start(self, name, ways, chosen, share=False, decided=None):
        """libvirt starts ``name`` with ``ways`` on both cache ids at its
        ``chosen`` mask; the hook's 'started' follows."""
        proc = subprocess.Popen(["sleep", "3600"])
        self.procs.append(proc)
        self.ids += 1
        group = f"qemu-{self.ids}-{name}-vcpus_0"
        os.mkdir(os.path.join(self.root, group))
        with open(os.path.join(self.root, group, "schemata"), "w") as f:
            f.write(f"L3:0={chosen:x};1={chosen:x}\n")
        with open(os.path.join(self.root, group, "tasks"), "w") as f:
            f.write(f"{proc.pid}\n")
        with open(os.path.join(self.run_dir, f"{name}.pid"), "w") as f:
            f.write(str(proc.pid))
        m = rdt_config.LibvirtConfigGuestMetaNovaRdt()
        m.vcpus = {0}
        m.pmd_share = share
        m.cache = [(0, "both", ways), (1, "both", ways)]
        if decided is not None:
            m.masks = {(0, "both"): decided, (1, "both"): decided}
        xml = (f"<domain type='kvm'><name>{name}</name>"
               f"<uuid>{uuid_mod.uuid4()}</uuid><metadata>{m.to_xml()}"
               f"</metadata></domain>").encode()
        Agent(self.settings).handle(
            hookinput.parse([name, "started", "begin", "-"], xml))
        return group

    def l3(self, name=""):
        with open(os.path.join(self.root, name, "schemata")) as f:
            return Schemata.parse(f.read()).domains("L3")


@pytest.fixture
def host(emulator, tmp_path):
    h = Host(str(tmp_path), emulator)
    h.clear()
    prep.prepare(h.fs, 2, 2)
    yield h
    h.clear()


def test_decided_masks_replace_libvirts_choice(host):
    group = host.start("vm1", 2, chosen=0x00c, share=True, decided=0x180)
    assert host.l3(group) == {0: 0x180, 1: 0x180}
    # The PMD COS spans its base and the sharer, one run.
    assert host.l3(PMD) == {0: 0x780, 1: 0x780}


def test_hostile_decided_masks_are_not_written(host):
    plain = host.start("vm1", 2, chosen=0x00c, decided=0x00c)
    # A second domain whose metadata claims the first one's ways.
    thief = host.start("vm2", 2, chosen=0x030, decided=0x00c)
    assert host.l3(plain) == {0: 0x00c, 1: 0x00c}
    assert host.l3(thief) == {0: 0x030, 1: 0x030}
    # ...or more ways than its <cachetune> got (the metadata says 3,
    # libvirt allocated 1).
    greedy = host.start("vm3", 3, chosen=0x040, decided=0x1c0)
    assert host.l3(greedy) == {0: 0x040, 1: 0x040}


def test_a_domain_without_a_plan_is_placed_by_the_hook(host):
    """Case 13: a sharer defined by hand lands at libvirt's choice, ways
    2-3, far from the PMD base.  The PMD COS used to stretch over 2-10 to
    reach it, and libvirt then found no room for anyone; the hook now
    moves it next to the base."""
    sharer = host.start("byhand", 2, chosen=0x00c, share=True)
    assert host.l3(sharer) == {0: 0x180, 1: 0x180}
    assert host.l3(PMD) == {0: 0x780, 1: 0x780}
    # Ways 2-6 stay free for the next domain, of any kind.
    plain = host.start("next", 5, chosen=0x07c)
    assert host.l3(plain) == {0: 0x07c, 1: 0x07c}
