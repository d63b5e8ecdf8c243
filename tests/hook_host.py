"""An emulated host for the hook: the FUSE emulator, nova-rdt's agent,
and real processes standing in for QEMU.  The test plays libvirt: it
makes each domain's group where libvirt's allocator would, then runs the
hook's 'started' as libvirtd would."""

from __future__ import annotations

import os
import subprocess
import uuid as uuid_mod

import pytest

from nova_rdt.emulator import mount as emu_mount
from nova_rdt.hook import hookinput
from nova_rdt.host.agent import Agent
from nova_rdt.host.settings import HookSettings
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.resctrl.schemata import Schemata
from nova_rdt.virt import config as rdt_config

PREFIX = "nova-rdt-"


def emulator_fixture(profile: str):
    """A module-scoped fixture: the emulator of ``profile``, mounted
    (skipped, with the reason, where FUSE is not usable)."""

    @pytest.fixture(scope="module")
    def emulator(tmp_path_factory):
        reason = emu_mount.fuse_unavailable_reason()
        if reason:
            pytest.skip(f"FUSE emulator unavailable: {reason}")
        emu = emu_mount.Emulator(profile, state_dir=str(
            tmp_path_factory.mktemp("emu")))
        emu.start()
        yield emu
        emu.stop()

    return emulator


def prepared_fs(emulator, prefix: str, reserved: int, pmd: int) -> Resctrl:
    """The emulator's resctrl with no group but the root, which holds
    every way, then prepared as nova-compute prepares a host."""
    from nova_rdt.host import prep
    root = emulator.mountpoint
    for name in os.listdir(root):
        if os.path.isfile(os.path.join(root, name, "schemata")):
            os.rmdir(os.path.join(root, name))
    with open(os.path.join(root, "schemata"), "w") as f:
        f.write("L3:0=7ff;1=7ff\n")
    fs = Resctrl(root, prefix=prefix, sysfs_cpu=emulator.sysfs_cpu)
    prep.prepare(fs, reserved, pmd)
    return fs


class HookHost:
    """gold-6252-like settings: 2 host ways, a 2-way PMD base."""

    def __init__(self, workdir: str, emu: emu_mount.Emulator,
                 root_schemata: str, classes: tuple[str, ...] = ()):
        self.root = emu.mountpoint
        self.root_schemata = root_schemata
        self.run_dir = os.path.join(workdir, "run")
        os.makedirs(self.run_dir)
        self.settings = HookSettings(
            resctrl_root=self.root, sysfs_cpu_root=emu.sysfs_cpu,
            state_path=os.path.join(workdir, "state"),
            libvirt_qemu_run_dir=self.run_dir, pmd_cos=True,
            pmd_shared_ways=2, reserved_host_ways=2, classes=classes,
            ovsdb_connection=f"unix:{workdir}/no-ovsdb.sock")
        self.fs = Resctrl(self.root, prefix=PREFIX, sysfs_cpu=emu.sysfs_cpu)
        self.procs: list[subprocess.Popen] = []
        self.ids = 0

    def clear(self) -> None:
        """Every group gone, the root back to the whole cache."""
        for p in self.procs:
            p.kill()
            p.wait()
        for name in os.listdir(self.root):
            if os.path.isfile(os.path.join(self.root, name, "schemata")):
                os.rmdir(os.path.join(self.root, name))
        with open(os.path.join(self.root, "schemata"), "w") as f:
            f.write(self.root_schemata)

    def launch(self, name: str, meta: rdt_config.LibvirtConfigGuestMetaNovaRdt,
               schemata: str | None, uuid: str | None = None
               ) -> tuple[subprocess.Popen, str | None]:
        """libvirt starts ``name`` (``uuid``, a new one by default): QEMU,
        its group written with ``schemata`` (None: no group of its own, a
        class member), then the hook.  Returns QEMU and the group's
        name."""
        proc = subprocess.Popen(["sleep", "3600"])
        self.procs.append(proc)
        self.ids += 1
        group = None
        if schemata is not None:
            group = f"qemu-{self.ids}-{name}-vcpus_0"
            os.mkdir(os.path.join(self.root, group))
            with open(os.path.join(self.root, group, "schemata"), "w") as f:
                f.write(schemata)
            with open(os.path.join(self.root, group, "tasks"), "w") as f:
                f.write(f"{proc.pid}\n")
        with open(os.path.join(self.run_dir, f"{name}.pid"), "w") as f:
            f.write(str(proc.pid))
        xml = (f"<domain type='kvm'><name>{name}</name>"
               f"<uuid>{uuid or uuid_mod.uuid4()}</uuid>"
               f"<metadata>{meta.to_xml()}</metadata></domain>").encode()
        Agent(self.settings).handle(
            hookinput.parse([name, "started", "begin", "-"], xml))
        return proc, group

    def schemata(self, name: str = "") -> Schemata:
        with open(os.path.join(self.root, name, "schemata")) as f:
            return Schemata.parse(f.read())

    def tasks(self, name: str) -> set[int]:
        with open(os.path.join(self.root, name, "tasks")) as f:
            return {int(t) for t in f.read().split()}
