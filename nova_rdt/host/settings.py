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
import math

from nova_rdt import exception
from nova_rdt import naming
from nova_rdt.allocation import rdtclass

# The same bounds as the options in nova_rdt.conf.
MAX_SECONDS = 3600.0
MAX_WAYS = 64
MAX_SETTINGS_BYTES = 1 << 20

_PATHS = ("resctrl_root", "sysfs_cpu_root", "state_path",
          "libvirt_qemu_run_dir", "ovs_vswitchd_pidfile")
_TEXTS = ("ovsdb_connection", "ovs_vswitchd_target")
_BOOLS = ("pmd_cos", "hook_strict")


class SettingsError(exception.NovaRdtError, ValueError):
    """A setting nova-rdt cannot run with; the message names it."""


@dataclasses.dataclass(frozen=True)
class HookSettings:
    """The ``[rdt]`` options as the hook, the agent and the driver use them.

    Every way of making one (:meth:`from_conf`, :meth:`load`, the
    constructor) runs :meth:`validate`, so ``hook install``, ``reconcile``,
    the hook and the driver's ``init_host`` refuse the same settings with
    the same words, instead of one installing what another refuses.
    """

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

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise SettingsError naming the first option nova-rdt refuses."""
        for name in _PATHS:
            _path(name, getattr(self, name))
        if self.log_file is not None:
            _path("log_file", self.log_file)
        for name in _TEXTS:
            _text(name, getattr(self, name))
        for name in _BOOLS:
            if not isinstance(getattr(self, name), bool):
                raise SettingsError(f"[rdt] {name} = "
                                    f"{getattr(self, name)!r}: must be "
                                    f"true or false")
        try:
            naming.check_prefix(self.group_prefix)
        except ValueError as e:
            raise SettingsError(f"[rdt] group_prefix = {e}") from None
        _seconds("lock_timeout", self.lock_timeout, 0.1)
        _seconds("hook_timeout", self.hook_timeout, 0.5)
        _ways("reserved_host_ways", self.reserved_host_ways, 1)
        _ways("pmd_shared_ways", self.pmd_shared_ways, 0)
        if self.reserved_host_ways + self.pmd_shared_ways >= MAX_WAYS:
            raise SettingsError(
                f"[rdt] reserved_host_ways={self.reserved_host_ways} + "
                f"pmd_shared_ways={self.pmd_shared_ways} leave no ways "
                f"for instances on any cache (at most {MAX_WAYS} ways)")
        if self.pmd_shared_ways and not self.pmd_cos:
            # Host preparation would make the PMD group over those ways
            # while the planner, with no PMD COS, hands them out.
            raise SettingsError(
                f"[rdt] pmd_shared_ways={self.pmd_shared_ways} needs [rdt] "
                f"pmd_cos = true: the shared ways are the PMD COS's; set "
                f"pmd_shared_ways = 0 to run without a PMD COS")
        self.parsed_classes()

    def parsed_classes(self) -> dict[str, rdtclass.RdtClass]:
        if not isinstance(self.classes, tuple) or \
                not all(isinstance(c, str) for c in self.classes):
            raise SettingsError(f"[rdt] classes = {self.classes!r}: must be "
                                f"a list of NAME:l3_ways=N[,mb=P]")
        for text in self.classes:
            if not text.isascii() or not text.isprintable():
                raise SettingsError(f"[rdt] class {text!r}: use ASCII, as "
                                    f"in NAME:l3_ways=N[,mb=P]")
        try:
            classes = rdtclass.parse_all(self.classes)
        except ValueError as e:
            # rdtclass names the class; a stray int() error would not.
            text = str(e) if str(e).startswith("[rdt]") else \
                f"[rdt] classes: {e}"
            raise SettingsError(text) from None
        for c in classes.values():
            if c.l3_ways > MAX_WAYS:
                raise SettingsError(f"[rdt] class {c.name!r}: l3_ways="
                                    f"{c.l3_ways} is above {MAX_WAYS}")
            if c.mb is not None and c.mb > 0xFFFFFFFF:
                raise SettingsError(f"[rdt] class {c.name!r}: mb={c.mb} "
                                    f"is above {0xFFFFFFFF}")
        return classes

    def check_host(self, caps) -> None:
        """Raise SettingsError when this host cannot honour the settings.

        What :meth:`validate` cannot know without the hardware: the ways
        each cache has, and whether each class fits beside the host's
        and the PMD's reserved ways.
        """
        from nova_rdt.allocation import hostlayout

        try:
            layout = hostlayout.plan(caps, self.reserved_host_ways,
                                     self.pmd_shared_ways)
        except hostlayout.HostPrepError as e:
            raise SettingsError(str(e)) from None
        for c in self.parsed_classes().values():
            if caps.cache and c.l3_ways > layout.managed_ways:
                raise SettingsError(
                    f"[rdt] class {c.name!r}: l3_ways={c.l3_ways} is more "
                    f"than the {layout.managed_ways} ways this host leaves "
                    f"for instances")

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
        """Read a settings JSON; SettingsError names the file and field."""
        try:
            with open(path, "rb") as f:
                raw = f.read(MAX_SETTINGS_BYTES + 1)
        except OSError as e:
            raise SettingsError(f"{path}: cannot read: "
                                f"{e.strerror or e}") from None
        if len(raw) > MAX_SETTINGS_BYTES:
            raise SettingsError(f"{path}: larger than "
                                f"{MAX_SETTINGS_BYTES} bytes")
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as e:
            raise SettingsError(f"{path}: not JSON: {e}") from None
        try:
            return cls.from_dict(data)
        except ValueError as e:
            raise SettingsError(f"{path}: {e}") from None

    @classmethod
    def from_dict(cls, data: dict) -> HookSettings:
        if not isinstance(data, dict):
            raise SettingsError("settings must be a JSON object")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise SettingsError(f"unknown settings {sorted(unknown)}; "
                                f"known: {', '.join(sorted(known))}")
        data = dict(data)
        if isinstance(data.get("classes"), list):
            data["classes"] = tuple(data["classes"])
        return cls(**data)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def dump(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump(self.as_dict(), f, indent=2, sort_keys=True)
            f.write("\n")


def _path(name: str, value: object) -> None:
    if not isinstance(value, str) or not value.startswith("/") \
            or "\0" in value or not value.isprintable():
        raise SettingsError(f"[rdt] {name} = {value!r}: must be an "
                            f"absolute path")


def _text(name: str, value: object) -> None:
    if not isinstance(value, str) or not value or not value.isprintable():
        raise SettingsError(f"[rdt] {name} = {value!r}: must be a "
                            f"non-empty printable string")


def _seconds(name: str, value: object, lo: float) -> None:
    # bool is an int; a JSON true is no number of seconds.
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or not lo <= value <= MAX_SECONDS:
        raise SettingsError(f"[rdt] {name} = {value!r}: must be a finite "
                            f"number of seconds, {lo}-{MAX_SECONDS:g}")


def _ways(name: str, value: object, lo: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) \
            or not lo <= value <= MAX_WAYS:
        raise SettingsError(f"[rdt] {name} = {value!r}: must be a whole "
                            f"number of ways, {lo}-{MAX_WAYS}")
