"""Support of test_recovery*.py (no tests here).

A compute host for the recovery tests: the emulated resctrl (FUSE), a
state path, a libvirt run directory, and "QEMUs" that are real processes.

What libvirt does is played here in its own order: it starts QEMU, makes
the domain's group (``qemu-<id>-<name>-vcpus_0``), writes its schemata,
moves the vCPU thread in, keeps ``<name>.pid`` and its status XML, and
runs the hook; on stop it kills QEMU, removes the group and runs the
hook's ``release``.  Everything nova-rdt does is the real code.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import uuid as uuid_mod

from nova_rdt import naming
from nova_rdt.emulator import mount as emu_mount
from nova_rdt.hook import adopt
from nova_rdt.hook import hookinput
from nova_rdt.host import records as records_mod
from nova_rdt.host.agent import Agent
from nova_rdt.host.agent import ReconcileReport
from nova_rdt.host.settings import HookSettings
from nova_rdt.resctrl.schemata import Schemata
from nova_rdt.virt import config as rdt_config

PROFILE = "gold-6252"          # 11 ways, 2 cache ids
FOREIGN = ("COS1", "pqos-cos2")
MANAGED = range(2, 9)          # ways 2-8: root has 0-1, the PMD 9-10
CLASS = "low"


def fusermount_uz(path: str) -> None:
    tool = shutil.which("fusermount3") or shutil.which("fusermount")
    cmd = [tool, "-u", "-z", path] if tool else ["umount", "-l", path]
    subprocess.run(cmd, check=False, capture_output=True)


@dataclasses.dataclass
class Vm:
    name: str
    uuid: str
    proc: subprocess.Popen
    group: str | None
    mask: int | None
    share: bool
    rdt_class: str | None


class Host:
    def __init__(self, workdir: str, emulator: emu_mount.Emulator):
        self.workdir = workdir
        self.emulator = emulator
        self.root = emulator.mountpoint
        self.state_path = os.path.join(workdir, "state")
        self.run_dir = os.path.join(workdir, "run")
        os.makedirs(self.run_dir, exist_ok=True)
        self.settings = HookSettings(
            resctrl_root=self.root, sysfs_cpu_root=emulator.sysfs_cpu,
            state_path=self.state_path, libvirt_qemu_run_dir=self.run_dir,
            pmd_cos=True, pmd_shared_ways=2, reserved_host_ways=2,
            classes=(f"{CLASS}:l3_ways=1",),
            ovsdb_connection=f"unix:{workdir}/no-ovsdb.sock")
        self.vms: dict[str, Vm] = {}
        self._ids = 0

    # -- nova-rdt ----------------------------------------------------------

    def agent(self) -> Agent:
        return Agent(self.settings)

    def reconcile(self) -> ReconcileReport:
        """What ``nova-rdt reconcile`` does: adopt, then reconcile."""
        agent = self.agent()
        adopted = ReconcileReport()
        adopt.adopt(agent, adopted)
        report = agent.reconcile()
        report.adopted = adopted.adopted
        return report

    def records(self) -> records_mod.Records:
        return records_mod.Records(self.state_path)

    # -- libvirt's part ----------------------------------------------------

    def _free_mask(self, top: bool) -> int:
        """A free way: sharing VMs take them from the top, next to the
        PMD COS, the others from the bottom, as the driver's PMD refusal
        would have them placed."""
        used = 0
        for name in self.groups():
            if name == "/" or name in FOREIGN:
                continue
            if name == naming.pmd_group("nova-rdt-"):
                continue
            used |= self.schemata(name).get("L3", 0) or 0
        for way in (reversed(MANAGED) if top else MANAGED):
            if not used & (1 << way):
                return 1 << way
        raise RuntimeError("no free way left")

    def _xml(self, vm: Vm) -> bytes:
        m = rdt_config.LibvirtConfigGuestMetaNovaRdt()
        m.vcpus = {0}
        m.pmd_share = vm.share
        m.rdt_class = vm.rdt_class
        m.mb = []
        return (f"<domain type='kvm'><name>{vm.name}</name>"
                f"<uuid>{vm.uuid}</uuid><metadata>{m.to_xml()}</metadata>"
                f"</domain>").encode()

    def start(self, name: str, share: bool = False,
              rdt_class: str | None = None, hook: bool = True) -> Vm:
        """libvirt starts a managed domain (spawn, or a migration in)."""
        self._ids += 1
        proc = subprocess.Popen(["sleep", "3600"])
        vm = Vm(name, str(uuid_mod.uuid4()), proc, None, None, share,
                rdt_class)
        self.vms[name] = vm
        if rdt_class is None:
            vm.mask = self._free_mask(top=share)
            vm.group = f"qemu-{self._ids}-{name}-vcpus_0"
            path = os.path.join(self.root, vm.group)
            os.mkdir(path)
            with open(os.path.join(path, "schemata"), "w") as f:
                f.write(f"L3:0={vm.mask:x};1={vm.mask:x}\n")
            with open(os.path.join(path, "tasks"), "w") as f:
                f.write(f"{proc.pid}\n")
        with open(os.path.join(self.run_dir, f"{name}.pid"), "w") as f:
            f.write(str(proc.pid))
        status = (b"<domstatus state='running' pid='%d'>" % proc.pid
                  + self._xml(vm) + b"</domstatus>")
        with open(os.path.join(self.run_dir, f"{name}.xml"), "wb") as f:
            f.write(status)
        if hook:
            self.hook(vm, "started")
        return vm

    def stop(self, name: str, hook: bool = True) -> None:
        """libvirt stops a domain (delete, or a migration out)."""
        vm = self.vms.pop(name)
        vm.proc.kill()
        vm.proc.wait()
        if vm.group and os.path.isdir(os.path.join(self.root, vm.group)):
            os.rmdir(os.path.join(self.root, vm.group))
        for ext in ("pid", "xml"):
            try:
                os.unlink(os.path.join(self.run_dir, f"{name}.{ext}"))
            except FileNotFoundError:
                pass
        if hook:
            self.hook(vm, "release")

    def crash(self, name: str) -> None:
        """QEMU dies with libvirtd down: nothing cleans up after it."""
        vm = self.vms.pop(name)
        vm.proc.kill()
        vm.proc.wait()

    def hook(self, vm: Vm, operation: str) -> None:
        event = hookinput.parse([vm.name, operation, "begin", "-"],
                                self._xml(vm))
        self.agent().handle(event)

    def kill_all(self) -> None:
        for vm in self.vms.values():
            vm.proc.kill()
            vm.proc.wait()
        self.vms.clear()

    # -- observing ---------------------------------------------------------

    def groups(self) -> set[str]:
        names = {n for n in os.listdir(self.root)
                 if n not in ("info", "mon_groups", "mon_data")
                 and os.path.isdir(os.path.join(self.root, n))}
        return names | {"/"}

    def schemata(self, name: str) -> dict[str, int]:
        """Cache id 0's mask per resource (both ids are kept alike)."""
        path = os.path.join(self.root, "" if name == "/" else name,
                            "schemata")
        with open(path) as f:
            s = Schemata.parse(f.read())
        return {res: s.domains(res).get(0) for res in s.resources()}

    def tasks(self, name: str) -> set[int]:
        with open(os.path.join(self.root, name, "tasks")) as f:
            return {int(t) for t in f.read().split()}

    def snapshot(self) -> dict:
        """Groups with their L3 masks (foreign ones by name only), and
        records by domain name."""
        out = {}
        for name in self.groups():
            if name in FOREIGN:
                out[name] = None
            else:
                out[name] = self.schemata(name).get("L3")
        recs, bad = self.records().all()
        assert bad == []
        return {"groups": out,
                "records": sorted(r.name for r in recs)}

    def leaks(self) -> list[str]:
        """Broken promises: a group or record without a running VM, a
        running RDT VM without its group or its class, a record's file
        left half-written."""
        out = []
        running = {vm.name: vm for vm in self.vms.values()}
        groups = self.groups()
        for g in groups:
            if naming.libvirt_group_machine(g) and not any(
                    naming.is_libvirt_group_of(g, n) for n in running):
                out.append(f"group {g} outlives its VM")
        classes = {vm.rdt_class for vm in running.values() if vm.rdt_class}
        if naming.class_group("nova-rdt-", CLASS) in groups and \
                CLASS not in classes:
            out.append(f"class {CLASS} group without members")
        for vm in running.values():
            if vm.group and vm.group not in groups:
                out.append(f"{vm.name}'s group {vm.group} is gone")
            if vm.group and vm.group in groups and \
                    vm.proc.pid not in self.tasks(vm.group):
                out.append(f"{vm.name}'s vCPU not in {vm.group}")
            if vm.rdt_class:
                g = naming.class_group("nova-rdt-", vm.rdt_class)
                if g not in groups or vm.proc.pid not in self.tasks(g):
                    out.append(f"{vm.name} not in class group {g}")
        recs, _bad = self.records().all()
        for r in recs:
            if r.name not in running:
                out.append(f"record of {r.name} outlives its VM")
        for vm in running.values():
            if not any(r.uuid == vm.uuid for r in recs):
                out.append(f"{vm.name} runs without a record")
        try:
            names = os.listdir(os.path.join(self.state_path, "domains"))
        except FileNotFoundError:
            names = []
        out += [f"temporary file {n} left" for n in names
                if n.endswith(".tmp")]
        for name in FOREIGN:
            if name not in groups:
                out.append(f"foreign group {name} was removed")
        out += self.pmd_problems()
        return out

    def pmd_problems(self) -> list[str]:
        """The PMD COS must be one run over its base and every sharing
        VM's ways."""
        pmd = naming.pmd_group("nova-rdt-")
        if pmd not in self.groups():
            return ["no PMD group"]
        mask = self.schemata(pmd).get("L3") or 0
        out = []
        low = mask & -mask
        if mask == 0 or (mask + low) & mask:
            out.append(f"PMD mask {mask:#x} is not one run")
        if mask & 0x600 != 0x600:
            out.append(f"PMD mask {mask:#x} lost its base 0x600")
        for vm in self.vms.values():
            if vm.share and vm.mask and mask & vm.mask != vm.mask:
                out.append(f"PMD mask {mask:#x} does not cover sharing "
                           f"{vm.name} ({vm.mask:#x})")
        return out


def add_foreign(root: str) -> None:
    """Groups of other tools (pqos), on the host's ways only."""
    for name in FOREIGN:
        os.mkdir(os.path.join(root, name))
        with open(os.path.join(root, name, "schemata"), "w") as f:
            f.write("L3:0=3;1=3\n")


def new_emulator(state_dir: str,
                 mountpoint: str | None = None) -> emu_mount.Emulator:
    emu = emu_mount.Emulator(PROFILE, state_dir=state_dir,
                             mountpoint=mountpoint)
    emu.start()
    add_foreign(emu.mountpoint)
    return emu


def reset_layout(host: Host) -> None:
    """The host layout, as nova-compute's start writes it."""
    from nova_rdt.host import prep
    from nova_rdt.resctrl.groups import Resctrl
    prep.prepare(Resctrl(host.root, sysfs_cpu=host.emulator.sysfs_cpu),
                 host.settings.reserved_host_ways,
                 host.settings.pmd_shared_ways)


def reset(host: Host) -> None:
    """Back to a prepared, empty host, as a fresh mount would be."""
    host.kill_all()
    host._ids = 0
    for name in host.groups() - {"/"}:
        if name in FOREIGN:
            continue
        os.rmdir(os.path.join(host.root, name))
    shutil.rmtree(host.state_path, ignore_errors=True)
    for name in os.listdir(host.run_dir):
        os.unlink(os.path.join(host.run_dir, name))
    from nova_rdt.host import prep
    from nova_rdt.resctrl.groups import Resctrl
    prep.prepare(Resctrl(host.root, sysfs_cpu=host.emulator.sysfs_cpu),
                 host.settings.reserved_host_ways,
                 host.settings.pmd_shared_ways)
