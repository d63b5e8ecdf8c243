"""What the hook knows about running managed domains, one file each.

The hook must never call libvirt (it would deadlock), so it keeps its
own record of each managed domain it saw start: the QEMU pid with its
start time, the libvirt group holding its vCPUs, and what it asked for.
``nova-rdt reconcile`` uses them after crashes to tell orphans from the
living, and to re-create a living domain's group when resctrl lost it.
Files are named by uuid (validated) and written atomically and durably
(:func:`write_durably`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import uuid as uuid_mod

from nova_rdt import exception
from nova_rdt import failpoints
from nova_rdt import naming
from nova_rdt.host import procinfo
from nova_rdt.resctrl.schemata import Schemata
from nova_rdt.resctrl.schemata import SchemataSyntaxError

# Linux's PID_MAX_LIMIT: no pid is larger.
MAX_PID = 1 << 22
MAX_NAME = 200
MAX_LABEL = 255
MAX_RECORD_BYTES = 64 * 1024
MAX_SCHEMATA = 4096
MAX_TASKS = 1024
MAX_CACHE_ID = 9999
MAX_CLASS_MASKS = 256
#: libvirt's cache types, as the nova-rdt metadata names them.
CACHE_KINDS = ("both", "code", "data")


def write_durably(path: str, data: bytes, mode: int = 0o644,
                  failpoints_on: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash at any instant
    leaves either the old file or the new one, never a torn or empty one,
    and the new one survives a power cut once this returns: a temporary
    file in the same directory, fsync, rename over, fsync of the
    directory (the rename is only durable once the directory is).

    An OSError (ENOSPC, EROFS, ...) leaves the old file and no temporary
    file behind.  ``failpoints_on``: pass the ``records.*`` failpoints
    (the writes they name, a record's, arm them; a room's does not).
    """
    d = os.path.dirname(path) or "."
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = _create_new(tmp, mode)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        if failpoints_on:
            failpoints.hit("records.write")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if failpoints_on:
        failpoints.hit("records.rename")
    fsync_dir(d)


def _create_new(tmp: str, mode: int) -> int:
    """A new file at ``tmp``, never one that was there: we run as root,
    and a symlink or file planted at this predictable name must not
    redirect the write.  What a crashed writer with our pid left (or
    anything planted) is unlinked, which never follows a link, and the
    create is tried once more."""
    flags = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
             | os.O_CLOEXEC)
    try:
        return os.open(tmp, flags, mode)
    except FileExistsError:
        os.unlink(tmp)
        return os.open(tmp, flags, mode)


def fsync_dir(path: str) -> None:
    dfd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


class RecordError(exception.NovaRdtError, ValueError):
    """A record nova-rdt did not write; the message names the field."""


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
    # rdt:slo (absent in older records): the controller protects it.
    slo: str | None = None
    # The schemata libvirt gave ``group`` (absent in older records): what
    # reconcile writes when it re-creates the group after resctrl lost it.
    schemata: str | None = None
    # The thread ids libvirt put in ``group`` (the vCPU threads), for the
    # same re-creation.
    tasks: tuple[int, ...] | None = None
    # Nova's owner project (absent in older records), for the exporter.
    project_id: str | None = None
    project_name: str | None = None
    # A class member's decided class masks, (cache id, libvirt cache
    # type, mask), from its metadata (absent in older records and for
    # other domains): where reconcile re-makes the class group after
    # resctrl lost it, instead of at the lowest free ways, where it can
    # wall the PMD sharers in.
    class_masks: tuple[tuple[int, str, int], ...] | None = None

    def __post_init__(self) -> None:
        # Records are read back as root by reconcile, which removes the
        # group a record names: every field is checked as hostile input.
        if not isinstance(self.uuid, str) or \
                canonical_uuid(self.uuid) != self.uuid:
            raise RecordError(f"uuid {self.uuid!r} is not a uuid")
        if not isinstance(self.name, str) or not self.name \
                or len(self.name) > MAX_NAME or "/" in self.name \
                or self.name in (".", "..") or not self.name.isprintable():
            raise RecordError(f"name {cut(self.name)} is not a domain name")
        check_int("pid", self.pid, 1, MAX_PID)
        if self.pid_start is not None:
            check_int("pid_start", self.pid_start, 0, 1 << 63)
        if not isinstance(self.pmd_share, bool):
            raise RecordError(f"pmd_share {cut(self.pmd_share)} is not "
                              f"true or false")
        if self.rdt_class is not None and not (
                isinstance(self.rdt_class, str)
                and naming.CLASS_NAME_RE.match(self.rdt_class)):
            raise RecordError(f"rdt_class {cut(self.rdt_class)} is not a "
                              f"class name")
        # Only libvirt's group of the domain, one path component: a record
        # can never point reconcile at anyone else's group.
        if self.group is not None and not (
                naming.is_safe_group_name(self.group)
                and naming.is_libvirt_group(self.group)):
            raise RecordError(f"group {cut(self.group)} is not a libvirt "
                              f"group name (qemu-<id>-<name>-vcpus_<list>)")
        if self.slo is not None and self.slo not in ("latency",):
            raise RecordError(f"slo {cut(self.slo)} is not an SLO "
                              f"(latency)")
        if self.schemata is not None:
            if not isinstance(self.schemata, str) or \
                    len(self.schemata) > MAX_SCHEMATA or self.group is None:
                raise RecordError(f"schemata {cut(self.schemata)} is not "
                                  f"the schemata of the record's group")
            try:
                Schemata.parse(self.schemata)
            except SchemataSyntaxError as e:
                raise RecordError(f"schemata: {e}") from None
        if self.tasks is not None:
            if not isinstance(self.tasks, (list, tuple)) or \
                    len(self.tasks) > MAX_TASKS or self.group is None:
                raise RecordError(f"tasks {cut(self.tasks)} is not a list "
                                  f"of at most {MAX_TASKS} thread ids")
            for tid in self.tasks:
                check_int("tasks", tid, 1, MAX_PID)
            object.__setattr__(self, "tasks", tuple(self.tasks))
        if self.class_masks is not None:
            self._check_class_masks()
        for field in ("instance_name", "flavor", "project_id",
                      "project_name"):
            value = getattr(self, field)
            if value is not None and not (
                    isinstance(value, str) and len(value) <= MAX_LABEL
                    and value.isprintable()):
                raise RecordError(f"{field} {cut(value)} is not a "
                                  f"printable label")

    def _check_class_masks(self) -> None:
        masks = self.class_masks
        if self.rdt_class is None or not isinstance(masks, (list, tuple)) \
                or not 0 < len(masks) <= MAX_CLASS_MASKS:
            raise RecordError(f"class_masks {cut(masks)} is not the "
                              f"masks of the record's class")
        out = []
        for item in masks:
            if not isinstance(item, (list, tuple)) or len(item) != 3 \
                    or item[1] not in CACHE_KINDS:
                raise RecordError(f"class_masks {cut(item)} is not "
                                  f"[cache id, {'|'.join(CACHE_KINDS)}, "
                                  f"mask]")
            check_int("class_masks cache id", item[0], 0, MAX_CACHE_ID)
            check_int("class_masks mask", item[2], 1, (1 << 64) - 1)
            out.append((item[0], item[1], item[2]))
        object.__setattr__(self, "class_masks", tuple(out))

    def planned_class_masks(self) -> dict[tuple[int, str], int] | None:
        """The decided class masks as the class join takes them."""
        if not self.class_masks:
            return None
        return {(cid, kind): mask for cid, kind, mask in self.class_masks}

    @classmethod
    def from_dict(cls, data: object) -> Record:
        if not isinstance(data, dict):
            raise RecordError("not a JSON object")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise RecordError(f"unknown fields {unknown}")
        missing = [n for n, f in fields.items() if n not in data
                   and f.default is dataclasses.MISSING]
        if missing:
            raise RecordError(f"missing fields {missing}")
        return cls(**data)

    def alive(self) -> bool:
        return procinfo.is_running(self.pid, self.pid_start)


def canonical_uuid(text: object) -> str | None:
    """``text`` as the canonical uuid it spells, or None."""
    if not isinstance(text, str) or len(text) != 36:
        return None
    try:
        return str(uuid_mod.UUID(text))
    except ValueError:
        return None


def check_int(field: str, value: object, lo: int, hi: int,
              error: type[Exception] = RecordError) -> None:
    """``value`` is an int (not a bool) in ``lo``..``hi``, else ``error``
    says so: a field of a file nova-rdt reads as root."""
    if isinstance(value, bool) or not isinstance(value, int) \
            or not lo <= value <= hi:
        raise error(f"{field} {cut(value)} is not a number {lo}-{hi}")


def cut(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_named(raw: bytes, file_name: str, limit: int, from_dict,
                error: type[Exception]):
    """What a ``<uuid>.json`` file of nova-rdt's holds (a record, a
    room): at most ``limit`` bytes of JSON, checked by ``from_dict``,
    whose uuid is its file's name.  ``error`` says what is wrong: the
    files are hostile input to a process running as root."""
    if len(raw) > limit:
        raise error(f"larger than {limit} bytes")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise error(f"not JSON: {str(e)[:200]}") from None
    obj = from_dict(data)
    if f"{obj.uuid}.json" != file_name:
        raise error(f"uuid {obj.uuid} does not match the file name")
    return obj


class Records:
    def __init__(self, state_path: str):
        self.state_path = state_path
        self.dir = os.path.join(state_path, "domains")

    def _path(self, uuid: str) -> str:
        return os.path.join(self.dir, f"{uuid_mod.UUID(uuid)}.json")

    def has_file(self, uuid: str) -> bool:
        """Is there a record file for ``uuid``, readable or not?"""
        return os.path.lexists(self._path(uuid))

    def put(self, rec: Record) -> None:
        # Readable by all: nova-compute and the exporter read records
        # unprivileged; they name domains, which are no secret on a host.
        os.makedirs(self.dir, mode=0o755, exist_ok=True)
        data = dataclasses.asdict(rec)
        if data["class_masks"] is None:
            # Left out when there are none: the record of a domain without
            # a class stays readable by a nova-rdt from before the field.
            del data["class_masks"]
        write_durably(self._path(rec.uuid), json.dumps(
            data, sort_keys=True).encode())

    def remove(self, uuid: str) -> None:
        path = self._path(uuid)
        failpoints.hit("records.remove")
        try:
            os.unlink(path)
        except FileNotFoundError:
            return
        fsync_dir(self.dir)

    def sweep_temporaries(self) -> list[str]:
        """Remove the temporary files of writes cut short by a crash (their
        writer is gone); returns their paths."""
        removed = []
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        for name in names:
            parts = name.split(".")
            # <uuid>.json.<pid>.tmp, nothing else.
            if len(parts) != 4 or parts[1:2] != ["json"] or \
                    parts[3] != "tmp" or not parts[2].isdigit() or \
                    canonical_uuid(parts[0]) != parts[0]:
                continue
            pid = int(parts[2])
            if pid == os.getpid() or procinfo.is_running(pid, None):
                continue
            path = os.path.join(self.dir, name)
            try:
                os.unlink(path)
            except FileNotFoundError:
                continue
            removed.append(path)
        return removed

    def read(self, name: str) -> Record:
        """The record in file ``name``; RecordError says what is wrong."""
        if canonical_uuid(name[:-len(".json")]) != name[:-len(".json")]:
            raise RecordError("the file name is not <uuid>.json")
        try:
            with open(os.path.join(self.dir, name), "rb") as f:
                raw = f.read(MAX_RECORD_BYTES + 1)
        except OSError as e:
            raise RecordError(f"cannot read: {e.strerror or e}") from None
        return parse_named(raw, name, MAX_RECORD_BYTES, Record.from_dict,
                           RecordError)

    def all(self) -> tuple[list[Record], list[str]]:
        """(records, "FILE: what is wrong" for each unusable file)."""
        recs, bad = [], []
        try:
            names = sorted(os.listdir(self.dir))
        except FileNotFoundError:
            return [], []
        for name in names:
            # A temporary file is a write cut short before its rename:
            # the record it would have replaced (or none) is the truth.
            if not name.endswith(".json"):
                continue
            try:
                recs.append(self.read(name))
            except RecordError as e:
                bad.append(f"{os.path.join(self.dir, name)}: {e}")
        return recs, bad
