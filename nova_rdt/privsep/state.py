"""Privileged changes to the hook's state directory (root's)."""

from __future__ import annotations

from nova_rdt.host import records as records_mod
from nova_rdt.privsep import sys_admin_pctxt


@sys_admin_pctxt.entrypoint
def remove_record(state_path: str, uuid: str) -> None:
    # Records._path accepts only a valid uuid, so the file is one of the
    # records and nothing else.
    records_mod.Records(state_path).remove(uuid)


class PrivilegedRecords(records_mod.Records):
    """Records read by the caller, removed through the daemon."""

    def remove(self, uuid: str) -> None:
        remove_record(self.state_path, uuid)
