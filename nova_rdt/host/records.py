"""What the hook knows about running managed domains, one file each.

The hook must never call libvirt (it would deadlock), so it keeps its
own record of each managed domain it saw start: the QEMU pid with its
start time, the libvirt group holding its vCPUs, and what it asked for.
``nova-rdt reconcile`` uses them after crashes to tell orphans from the
living.  Files are named by uuid (validated) and replaced atomically.
"""

from __future__ import annotations

import dataclasses
import json
import os
import uuid as uuid_mod

from nova_rdt.host import procinfo


@dataclasses.dataclass(frozen=True)
class Record:
    uuid: str
    name: str
    pid: int
    pid_start: int | None
    pmd_share: bool
    rdt_class: str | None
    group: str | None            # libvirt's group of the vCPUs, if any
    # Nova's names, for the exporter's labels (absent in older records).
    instance_name: str | None = None
    flavor: str | None = None

    def alive(self) -> bool:
        return procinfo.is_running(self.pid, self.pid_start)


class Records:
    def __init__(self, state_path: str):
        self.state_path = state_path
        self.dir = os.path.join(state_path, "domains")

    def _path(self, uuid: str) -> str:
        return os.path.join(self.dir, f"{uuid_mod.UUID(uuid)}.json")

    def put(self, rec: Record) -> None:
        # Readable by all: nova-compute and the exporter read records
        # unprivileged; they name domains, which are no secret on a host.
        os.makedirs(self.dir, mode=0o755, exist_ok=True)
        path = self._path(rec.uuid)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(dataclasses.asdict(rec), f, sort_keys=True)
        os.replace(tmp, path)

    def remove(self, uuid: str) -> None:
        try:
            os.unlink(self._path(uuid))
        except FileNotFoundError:
            pass

    def all(self) -> tuple[list[Record], list[str]]:
        """(records, names of unreadable files)."""
        recs, bad = [], []
        try:
            names = sorted(os.listdir(self.dir))
        except FileNotFoundError:
            return [], []
        for name in names:
            if not name.endswith(".json"):
                continue
            try:
                with open(os.path.join(self.dir, name)) as f:
                    recs.append(Record(**json.load(f)))
            except (OSError, ValueError, TypeError):
                bad.append(name)
        return recs, bad
