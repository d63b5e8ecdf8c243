"""The hook's configuration, resolved once, read fast.

The hook runs on every domain start; importing oslo.config and oslo.log
alone costs ~0.2 s here, over the hook's whole budget.  So
``nova-rdt hook install`` resolves the ``[rdt]`` options with oslo.config
and writes the values the hook needs as JSON beside the shim; the hook
reads only that.  Re-run the install after changing nova-rdt.conf (the
devstack plugin does).
"""

from __future__ import annotations

import dataclasses
import json


@dataclasses.dataclass(frozen=True)
class HookSettings:
    resctrl_root: str = "/sys/fs/resctrl"
    sysfs_cpu_root: str = "/sys/devices/system/cpu"
    group_prefix: str = "nova-rdt-"
    lock_timeout: float = 5.0
    reserved_host_ways: int = 2
    pmd_shared_ways: int = 0
    classes: tuple[str, ...] = ()
    pmd_cos: bool = False
    ovsdb_connection: str = "unix:/var/run/openvswitch/db.sock"
    ovs_vswitchd_pidfile: str = "/var/run/openvswitch/ovs-vswitchd.pid"
    ovs_vswitchd_target: str = "ovs-vswitchd"
    state_path: str = "/var/lib/nova-rdt"
    libvirt_qemu_run_dir: str = "/run/libvirt/qemu"
    hook_strict: bool = False
    hook_timeout: float = 10.0
    log_file: str | None = None

    @classmethod
    def from_conf(cls, conf) -> HookSettings:
        r = conf.rdt
        return cls(
            resctrl_root=r.resctrl_root, sysfs_cpu_root=r.sysfs_cpu_root,
            group_prefix=r.group_prefix,
            lock_timeout=min(r.lock_timeout, r.hook_timeout / 2),
            reserved_host_ways=r.reserved_host_ways,
            pmd_shared_ways=r.pmd_shared_ways, classes=tuple(r.classes),
            pmd_cos=r.pmd_cos, ovsdb_connection=r.ovsdb_connection,
            ovs_vswitchd_pidfile=r.ovs_vswitchd_pidfile,
            ovs_vswitchd_target=r.ovs_vswitchd_target,
            state_path=r.state_path,
            libvirt_qemu_run_dir=r.libvirt_qemu_run_dir,
            hook_strict=r.hook_strict, hook_timeout=r.hook_timeout,
            log_file=conf.log_file if "log_file" in conf else None)

    @classmethod
    def load(cls, path: str) -> HookSettings:
        with open(path) as f:
            data = json.load(f)
        try:
            return cls.from_dict(data)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from e

    @classmethod
    def from_dict(cls, data: dict) -> HookSettings:
        if not isinstance(data, dict):
            raise ValueError("settings must be a JSON object")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown settings {sorted(unknown)}")
        data = dict(data)
        if "classes" in data:
            data["classes"] = tuple(data["classes"])
        return cls(**data)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def dump(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump(self.as_dict(), f, indent=2, sort_keys=True)
            f.write("\n")
