"""Which kernel release the emulator behaves as, and what changed when.

resctrl's user-visible behaviour changed between the kernels operators
run (RHEL 9's 5.14, Ubuntu 22.04's 5.15, Debian 12's 6.1, Ubuntu 24.04's
6.8, mainline).  Each rule below names the release in which it changed and
the commit that changed it, so the model switches exactly there.

The default is the running kernel's X.Y when it is at least
:data:`OLDEST`, else :data:`FALLBACK`; ``NOVA_RDT_EMULATOR_KERNEL``
overrides it (CI pins a version that way).
"""

from __future__ import annotations

import dataclasses
import os
import re

from nova_rdt import exception

#: The releases the conformance catalogue and the library's tests run on.
SUPPORTED = ("5.14", "5.15", "6.1", "6.8", "6.14", "6.16")
OLDEST = (5, 14)
FALLBACK = "6.1"
ENV = "NOVA_RDT_EMULATOR_KERNEL"

_VERSION = re.compile(r"^\s*(\d+)\.(\d+)(?:[.\-+~_].*)?\s*$")


class VersionError(exception.NovaRdtError, ValueError):
    pass


@dataclasses.dataclass(frozen=True, order=True)
class KernelVersion:
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    def at_least(self, text: str) -> bool:
        return (self.major, self.minor) >= _tuple(text)

    # -- the rules, each at the release that changed it ---------------------

    @property
    def mon_group_rename(self) -> bool:
        """rdtgroup_rename(): MON groups move between CTRL_MON parents
        (v6.5, "x86/resctrl: Implement rename op for mon groups").  Before,
        kernfs has no rename op and answers EPERM."""
        return self.at_least("6.5")

    @property
    def task_lists(self) -> bool:
        """rdtgroup_tasks_write() takes a comma-separated list, with
        "Task list parsing error pid", "Invalid pid" and "Error while
        processing task" (v6.7, fe2a20ea0b09 "x86/resctrl: Add multiple
        tasks to the resctrl group at once").  Before, one pid parsed with
        kstrtoint() before rdt_last_cmd_clear()."""
        return self.at_least("6.7")

    @property
    def sparse_masks_file(self) -> bool:
        """info/<cache>/sparse_masks (v6.7, "x86/resctrl: Add sparse_masks
        file in info")."""
        return self.at_least("6.7")

    @property
    def rmid_after_closid(self) -> bool:
        """rdtgroup_mkdir_ctrl_mon() allocates the CLOSID before the RMID
        (v6.8, "x86/resctrl: Allocate the RMID after the CLOSID" series).
        Before, mkdir_rdt_prepare() took an RMID first, so a mkdir refused
        for want of a CLOSID still sent an RMID through limbo."""
        return self.at_least("6.8")

    @property
    def mbps_set_at_parse(self) -> bool:
        """parse_bw() writes an mba_MBps value to mbps_val[] at once
        instead of staging it (5.19, "x86/resctrl: Switch over to the
        resctrl mbps_val list"): no all-or-nothing, no duplicate check."""
        return self.at_least("5.19")

    @property
    def mb_u32(self) -> bool:
        """bw_validate() parses with kstrtou32(), says "Invalid MB value",
        and stores MBps values unrounded (v6.12, be99ce3b7dd7 "x86/resctrl:
        Avoid overflow in MB settings in bw_validate()").  Before:
        kstrtoul(), "Non-decimal digit in MB value", rounding to
        bandwidth_gran even in MBps mode, u32 truncation."""
        return self.at_least("6.12")

    @property
    def mba_mbps_event(self) -> bool:
        """The per-group ``mba_MBps_event`` file (v6.14, Tony Luck's
        "x86/resctrl: mba_MBps enhancements")."""
        return self.at_least("6.14")

    @property
    def unpadded_values(self) -> bool:
        """show_doms() prints "%d=%x" / "%d=%u" (v6.15, 43312b8ea1c6
        "x86/resctrl: Remove data_width and the tabular format").  Before:
        "%d=%0*x" and "%d=%*u" padded to max_data_width.  Names stay
        right-aligned to max_name_width in every release."""
        return self.at_least("6.15")

    @property
    def mkdir_checks_parent_under_lock(self) -> bool:
        """mkdir_rdt_prepare() checks is_mon_groups() after
        rdtgroup_kn_lock_live() (v6.15, 45c2e30bbd64 "x86/resctrl: Fix
        rdtgroup_mkdir()'s unlocked use of kernfs_node::name"), so a mkdir
        under info/ gets ENODEV; before, rdtgroup_mkdir() answered EPERM."""
        return self.at_least("6.15")

    @property
    def clears_status_on_cpus_and_mkdir(self) -> bool:
        """rdtgroup_cpus_write() and mkdir_rdt_prepare() call
        rdt_last_cmd_clear() (restored in v6.16 by dd2922dcfaa3; removed
        in v5.4 by c8eafe149530).  In between, their messages are appended
        to whatever the buffer held."""
        return self.at_least("6.16")

    @property
    def source_dir(self) -> str:
        """Where the filesystem code lives, for citations."""
        return ("fs/resctrl" if self.at_least("6.16")
                else "arch/x86/kernel/cpu/resctrl")


def _tuple(text: str) -> tuple[int, int]:
    m = _VERSION.match(text)
    if not m:
        raise VersionError(
            f"kernel version {text!r} is not of the form X.Y (for example "
            f"{', '.join(SUPPORTED)})")
    return int(m.group(1)), int(m.group(2))


def parse(text: str | KernelVersion) -> KernelVersion:
    """``"6.8"`` (or a uname release such as ``"6.1.0-18-amd64"``)."""
    if isinstance(text, KernelVersion):
        return text
    major, minor = _tuple(str(text))
    if (major, minor) < OLDEST:
        raise VersionError(
            f"kernel version {text!r} is older than the oldest the emulator "
            f"models ({OLDEST[0]}.{OLDEST[1]}); supported: "
            f"{', '.join(SUPPORTED)}")
    return KernelVersion(major, minor)


def running() -> KernelVersion | None:
    try:
        return parse(os.uname().release)
    except VersionError:
        return None


def default() -> KernelVersion:
    """``$NOVA_RDT_EMULATOR_KERNEL``, else the running kernel when new
    enough, else :data:`FALLBACK`."""
    env = os.environ.get(ENV)
    if env:
        return parse(env)
    return running() or parse(FALLBACK)


def resolve(spec: str | KernelVersion | None) -> KernelVersion:
    return default() if spec is None else parse(spec)
