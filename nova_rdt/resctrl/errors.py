"""Typed resctrl errors.

Each carries the errno and the kernel's ``info/last_cmd_status`` text, so
an operator sees *why* the kernel refused ("The mask 5 has non-consecutive
1-bits"), not just EINVAL.
"""

from __future__ import annotations

import errno as errno_mod

from nova_rdt import exception


class ResctrlError(exception.NovaRdtError):
    """A resctrl operation failed."""

    def __init__(self, message: str, *, errno: int | None = None,
                 path: str | None = None, status: str | None = None):
        self.errno = errno
        self.path = path
        # The kernel clears last_cmd_status to "ok" before some checks that
        # fail without a message; that "ok" says nothing, so drop it.
        self.status = status if status and status != "ok" else None
        super().__init__(message)

    def __str__(self) -> str:
        details = []
        if self.path:
            details.append(f"path={self.path}")
        if self.errno is not None:
            details.append(
                f"errno={errno_mod.errorcode.get(self.errno, self.errno)}")
        if self.status:
            details.append(f"kernel said: {self.status!r}")
        msg = super().__str__()
        return f"{msg} ({', '.join(details)})" if details else msg


class NotMounted(ResctrlError):
    """No resctrl filesystem at the configured root."""


class GroupNotFound(ResctrlError):
    pass


class GroupExists(ResctrlError):
    pass


class NotOwned(ResctrlError):
    """Refused: the group is not nova-rdt's (libvirt's, pqos', a runtime's)."""


class InvalidGroupName(ResctrlError):
    pass


class OutOfClosids(ResctrlError):
    """Every CLOS is taken (mkdir gave ENOSPC, "Out of CLOSIDs")."""


class OutOfRmids(ResctrlError):
    """Every RMID is taken or still in limbo (ENOSPC or EBUSY)."""


class WriteRejected(ResctrlError):
    """The kernel refused a write to schemata, cpus, tasks or mode."""


class LockTimeout(ResctrlError):
    pass
