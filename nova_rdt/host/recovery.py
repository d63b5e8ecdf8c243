"""What reconcile cannot repair: the degraded reasons, and how to see them.

Every reason is derived from what can be observed on the host (the
resctrl mount, the state path, the records against resctrl), never from a
status file: the state path may be the thing that is broken.  The same
probes serve ``nova-rdt reconcile``, nova-compute's start and the
exporter's ``nova_rdt_degraded{reason=...}``.
"""

from __future__ import annotations

from collections.abc import Iterable
import dataclasses
import errno
import os
from typing import TYPE_CHECKING

from nova_rdt.resctrl import errors

if TYPE_CHECKING:
    from nova_rdt.host.records import Record

# reason -> what it means, for the docs and the metric's HELP.
REASONS: dict[str, str] = {
    "resctrl_unavailable":
        "resctrl is not mounted, or does not answer (ENOTCONN/EIO): no "
        "group can be read or repaired, and no RDT instance is placed here",
    "state_full":
        "the state path is full (ENOSPC): records cannot be written",
    "state_readonly":
        "the state path is read-only (EROFS): records cannot be written "
        "or dropped",
    "state_unwritable":
        "the state path refuses writes for another reason (EACCES, EIO)",
    "records_unreadable":
        "a record file is not one nova-rdt wrote; it is left in place",
    "group_not_restored":
        "a running instance's resctrl group is gone and could not be "
        "re-created (no schemata recorded, or the kernel refused)",
    "pmd_degraded":
        "the PMD COS cannot cover every PMD-sharing instance",
    "controller_state":
        "the runtime controller's fail-safe state file is unusable",
}

# What the exporter can see for itself at each scrape; the others are
# said by reconcile (its log line and its report) only.
OBSERVABLE = ("resctrl_unavailable", "state_full", "state_readonly",
              "state_unwritable", "records_unreadable", "group_not_restored")

_RESCTRL_ERRNOS = frozenset({errno.ENOTCONN, errno.EIO, errno.ENODEV,
                             errno.ENXIO, errno.ESTALE})


@dataclasses.dataclass(frozen=True)
class Degraded:
    reason: str
    detail: str

    def __post_init__(self) -> None:
        if self.reason not in REASONS:
            raise ValueError(f"unknown degraded reason {self.reason!r}")

    def line(self) -> str:
        """The one log line an operator reads."""
        return f"nova-rdt degraded ({self.reason}): {self.detail}"


def state_reason(e: OSError) -> str:
    """The degraded reason of a failed write under the state path."""
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return "state_full"
    if e.errno == errno.EROFS:
        return "state_readonly"
    return "state_unwritable"


def resctrl_lost(e: BaseException) -> bool:
    """Whether ``e`` says resctrl itself is gone (unmounted, emulator
    dead), as opposed to one group or one write being refused."""
    if isinstance(e, errors.NotMounted):
        return True
    code = getattr(e, "errno", None)
    return code in _RESCTRL_ERRNOS


def probe_resctrl(root: str) -> Degraded | None:
    """resctrl_unavailable unless ``root`` is a live resctrl mount."""
    try:
        os.listdir(os.path.join(root, "info"))
        os.listdir(root)
    except OSError as e:
        return Degraded("resctrl_unavailable",
                        f"{root}: {e.strerror or e}; mount resctrl "
                        f"there, then run 'nova-rdt reconcile'")
    return None


def probe_state_path(path: str) -> Degraded | None:
    """state_readonly / state_full of the file system holding ``path``
    (its nearest existing ancestor), read from statvfs: no write."""
    where = os.path.abspath(path)
    while not os.path.exists(where) and os.path.dirname(where) != where:
        where = os.path.dirname(where)
    try:
        st = os.statvfs(where)
    except OSError as e:
        return Degraded("state_unwritable", f"{path}: {e.strerror or e}")
    if st.f_flag & os.ST_RDONLY:
        return Degraded("state_readonly",
                        f"{path} is on a read-only file system; records "
                        f"cannot be written or dropped")
    # f_bfree, not f_bavail: the hook and reconcile write as root.
    if st.f_bfree == 0 or (st.f_files and st.f_ffree == 0):
        return Degraded("state_full",
                        f"{path} is full (no free blocks or inodes); "
                        f"records cannot be written")
    return None


def lost_groups(records: Iterable[Record], existing: set[str]
                ) -> list[Record]:
    """Living records whose libvirt group is not among ``existing``."""
    return [r for r in records
            if r.group and r.group not in existing and r.alive()]
