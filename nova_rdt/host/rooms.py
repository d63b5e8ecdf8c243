"""Rooms: the ways a starting sharer's ``prepare`` kept free, until it runs.

libvirt runs the hook's ``prepare`` before it allocates a domain's ways;
the hook then takes the sharer's ways out of the PMD COS
(:meth:`DomainLifecycle.make_room`).  Every other re-derivation of the
PMD COS -- a stopped sharer's ``release`` running late in the background,
``reconcile``, another domain's ``started`` -- used to read only the
records, which know the new domain from its ``started`` on, and put the
ways back: libvirt then refused the start with "Not enough room" though
room had been made.

So ``prepare`` also writes a *room*, ``<state_path>/rooms/<uuid>.json``
(durably, under the resctrl ``flock``): the ways it keeps free, and which
process kept them when.  Every re-derivation honours the rooms in effect
as taken (:func:`stale` says which are not); ``started`` turns the room
into the domain's record; ``release`` of that uuid drops it, unless the
room is a later start's (:func:`dropped_by`).  A room libvirt never
followed up (a start abandoned, a ``release`` lost) stops counting after
``STALE_AFTER_TIMEOUTS`` hook timeouts without a QEMU of that start, and
reconcile and ``release`` remove it.

The files are read back as root: every field is checked as hostile
input, a file is opened without following links or blocking, and one
that is not a room is never honoured (it is removed where nova-rdt could
have written it).  The rules here are pure; :class:`Rooms` and
:class:`Pending` do the I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
import dataclasses
import errno
import json
import os
import stat
import time
from typing import TYPE_CHECKING

from nova_rdt import exception
from nova_rdt import naming
from nova_rdt.host import procinfo
from nova_rdt.host import records as records_mod
from nova_rdt.resctrl.schemata import Schemata
from nova_rdt.resctrl.schemata import SchemataSyntaxError

if TYPE_CHECKING:
    from nova_rdt.host.context import HostContext

#: A room stops counting after this many hook timeouts with no QEMU of
#: its start running: libvirt forks QEMU right after ``prepare`` (the
#: ways are allocated while QEMU waits for libvirt's handshake), so a
#: start that got that far is never this slow before its fork.
STALE_AFTER_TIMEOUTS = 6
MAX_ROOM_BYTES = 8 * 1024
#: More rooms than CLOS is a host no start uses: the rest is ignored.
MAX_ROOMS = 256
#: The resources a sharer's decided ways are on.
RESOURCES = tuple(naming.RESOURCE_OF_KIND.values())
_BOOT_ID = "/proc/sys/kernel/random/boot_id"


class RoomError(exception.NovaRdtError, ValueError):
    """A file that is not a room nova-rdt wrote; the message says why."""


@dataclasses.dataclass(frozen=True)
class Invocation:
    """A hook process: its pid and start time (clock ticks since boot).

    libvirt forks the hook when it runs the operation (the shim forks
    the background process before it exits), so the start time orders
    the operations libvirt invoked, even when their work runs late."""

    pid: int
    start: int | None

    @classmethod
    def current(cls) -> Invocation:
        pid = os.getpid()
        return cls(pid, procinfo.proc_start_time(pid))


@dataclasses.dataclass(frozen=True)
class Room:
    uuid: str
    name: str                  # the domain's, for its QEMU pid file
    schemata: str              # the ways kept free, as schemata lines
    boot_id: str               # the boot it was made in
    pid: int                   # the prepare hook's process...
    pid_start: int             # ...and its start, in clock ticks
    made: int                  # when it was written, in clock ticks

    def __post_init__(self) -> None:
        if not isinstance(self.uuid, str) or \
                records_mod.canonical_uuid(self.uuid) != self.uuid:
            raise RoomError(f"uuid {_cut(self.uuid)} is not a uuid")
        try:
            naming.check_domain_name(self.name)
        except ValueError as e:
            raise RoomError(f"name: {e}") from None
        if not isinstance(self.boot_id, str) or \
                records_mod.canonical_uuid(self.boot_id) != self.boot_id:
            raise RoomError(f"boot_id {_cut(self.boot_id)} is not a boot "
                            f"id")
        _int("pid", self.pid, 1, records_mod.MAX_PID)
        _int("pid_start", self.pid_start, 0, (1 << 63) - 1)
        _int("made", self.made, self.pid_start
             if isinstance(self.pid_start, int) else 0, (1 << 63) - 1)
        if not isinstance(self.schemata, str) or \
                len(self.schemata) > records_mod.MAX_SCHEMATA:
            raise RoomError(f"schemata {_cut(self.schemata)} is not "
                            f"schemata lines")
        try:
            parsed = Schemata.parse(self.schemata)
        except SchemataSyntaxError as e:
            raise RoomError(f"schemata: {e}") from None
        wanted = False
        for res in parsed.resources():
            if res not in RESOURCES:
                raise RoomError(f"schemata: {res} is not a cache a sharer "
                                f"holds ways of ({', '.join(RESOURCES)})")
            for cid, mask in parsed.domains(res).items():
                _int("schemata cache id", cid, 0, records_mod.MAX_CACHE_ID)
                _int("schemata mask", mask, 0, (1 << 64) - 1)
                wanted = wanted or mask != 0
        if not wanted:
            raise RoomError("schemata keeps no way free")

    def ways(self) -> Schemata:
        return Schemata.parse(self.schemata)

    @classmethod
    def from_dict(cls, data: object) -> Room:
        if not isinstance(data, dict):
            raise RoomError("not a JSON object")
        names = {f.name for f in dataclasses.fields(cls)}
        if set(data) != names:
            raise RoomError(f"fields {sorted(map(str, data))[:10]}, not "
                            f"{sorted(names)}")
        return cls(**data)

    @classmethod
    def parse(cls, raw: bytes, file_name: str) -> Room:
        """The room in ``raw``, read from ``file_name``; RoomError says
        what is wrong."""
        return records_mod.parse_named(raw, file_name, MAX_ROOM_BYTES,
                                       cls.from_dict, RoomError)

    def to_json(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), sort_keys=True).encode()


def _int(field: str, value: object, lo: int, hi: int) -> None:
    records_mod.check_int(field, value, lo, hi, RoomError)


_cut = records_mod.cut


# -- the rules: pure -------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Facts:
    """What tells a room in effect from a stale one, read at one moment."""

    boot_id: str | None
    now: int                          # clock ticks since boot
    ticks_per_second: int
    living: frozenset[str]            # uuids with a living record
    #: domain name -> start (clock ticks) of the running process its
    #: QEMU pid file names
    qemu: Mapping[str, int]


def stale(room: Room, facts: Facts, timeout: float) -> str | None:
    """Why ``room`` no longer counts, or None while it does.

    It counts from ``prepare`` until its domain runs with a record (then
    the record's group holds the ways), and never across a reboot.  A
    room written more than ``STALE_AFTER_TIMEOUTS`` x ``timeout`` ago
    counts only while a QEMU started after its ``prepare`` was invoked
    runs under its name: the start is still going (a large guest's
    memory takes a while), its ``started`` has yet to come."""
    if facts.boot_id is not None and room.boot_id != facts.boot_id:
        return "made before this boot"
    if room.uuid in facts.living:
        return "the domain runs with its record"
    if room.made > facts.now:
        return "made after now"
    limit = STALE_AFTER_TIMEOUTS * timeout * facts.ticks_per_second
    if facts.now - room.made <= limit:
        return None
    qemu = facts.qemu.get(room.name)
    if qemu is not None and qemu >= room.pid_start:
        return None
    return (f"no QEMU of its start after "
            f"{STALE_AFTER_TIMEOUTS * timeout:g}s")


def dropped_by(room: Room, release: Invocation) -> bool:
    """Whether a ``release`` of the room's uuid, run by ``release``, ends
    it.  A release that libvirt invoked before the room's ``prepare`` is
    the one of an earlier run of the domain (stopped, then started again
    while its release still ran in the background): the room is the new
    start's and stays.  A release in the very process that made the room
    follows it (the agent driven in-process)."""
    if (release.pid, release.start) == (room.pid, room.pid_start):
        return True
    return release.start is None or release.start > room.pid_start


def kept_free(rooms: Iterable[Room]) -> Schemata | None:
    """The union of the ways ``rooms`` keep free; None without any."""
    lines: dict[str, dict[int, int]] = {}
    for room in rooms:
        ways = room.ways()
        for res in ways.resources():
            per = lines.setdefault(res, {})
            for cid, mask in ways.domains(res).items():
                per[cid] = per.get(cid, 0) | mask
    return Schemata(lines) if lines else None


def held(rooms: Iterable[Room]) -> dict[tuple[str, int], int]:
    """:func:`kept_free` per (resource, cache id), as a class group's
    placement takes the ways it must avoid."""
    free = kept_free(rooms)
    if free is None:
        return {}
    return {(res, cid): mask for res in free.resources()
            for cid, mask in free.domains(res).items()}


def merged(*parts: Schemata | None) -> Schemata | None:
    """The union of schemata lines; None when there is none."""
    lines: dict[str, dict[int, int]] = {}
    for s in parts:
        if s is None:
            continue
        for res in s.resources():
            per = lines.setdefault(res, {})
            for cid, mask in s.domains(res).items():
                per[cid] = per.get(cid, 0) | mask
    return Schemata(lines) if lines else None


# -- I/O -------------------------------------------------------------------

class Rooms:
    """The rooms' files, ``<state_path>/rooms/<uuid>.json``."""

    def __init__(self, state_path: str):
        self.dir = os.path.join(state_path, "rooms")

    def _path(self, uuid: str) -> str:
        if records_mod.canonical_uuid(uuid) != uuid:
            raise RoomError(f"uuid {_cut(uuid)} is not a uuid")
        return os.path.join(self.dir, f"{uuid}.json")

    def put(self, room: Room) -> None:
        # Readable by all, as the records: nova-compute's reconcile reads
        # them unprivileged.
        os.makedirs(self.dir, mode=0o755, exist_ok=True)
        # Not through the records' failpoints: the faults lab arms them
        # for the record a start writes, not for this earlier write.
        records_mod.write_durably(self._path(room.uuid), room.to_json(),
                                  failpoints_on=False)

    def remove(self, uuid: str) -> bool:
        """Remove ``uuid``'s room; whether there was one."""
        path = self._path(uuid)
        # Looked for first: on a read-only state path unlink says EROFS
        # even when there is nothing to remove.
        if not os.path.lexists(path):
            return False
        return self._unlink(path)

    def _unlink(self, path: str) -> bool:
        try:
            os.unlink(path)          # never follows a link
        except FileNotFoundError:
            return False
        records_mod.fsync_dir(self.dir)
        return True

    def read(self, name: str) -> Room:
        """The room in file ``name``: a regular file, opened without
        following a link and without blocking (a FIFO planted there must
        not hang the hook)."""
        path = os.path.join(self.dir, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                         | os.O_CLOEXEC)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise RoomError("a symbolic link") from None
            raise RoomError(f"cannot read: {e.strerror or e}") from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise RoomError("not a regular file")
            chunks, size = [], 0
            while size <= MAX_ROOM_BYTES:
                chunk = os.read(fd, MAX_ROOM_BYTES + 1 - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        except OSError as e:
            raise RoomError(f"cannot read: {e.strerror or e}") from None
        finally:
            os.close(fd)
        return Room.parse(b"".join(chunks), name)

    def all(self) -> tuple[list[Room], list[tuple[str, str]]]:
        """(rooms, (file name, what is wrong) of each other entry).
        Temporary files of a write in progress are neither."""
        try:
            names = sorted(os.listdir(self.dir))
        except FileNotFoundError:
            return [], []
        except OSError as e:
            # No rooms to honour rather than no PMD COS sync at all.
            return [], [(".", f"cannot list: {e.strerror or e}")]
        rooms: list[Room] = []
        bad: list[tuple[str, str]] = []
        for name in names:
            if _temporary(name) is not None:
                continue
            if len(rooms) >= MAX_ROOMS:
                bad.append((name, f"more than {MAX_ROOMS} rooms"))
                continue
            stem = name[:-len(".json")] if name.endswith(".json") else ""
            if records_mod.canonical_uuid(stem) != stem:
                bad.append((name, "the file name is not <uuid>.json"))
                continue
            try:
                rooms.append(self.read(name))
            except RoomError as e:
                bad.append((name, str(e)))
        return rooms, bad

    def remove_bad(self, name: str) -> bool:
        """Remove entry ``name`` that is not a room, when nova-rdt could
        have written that name (``<uuid>.json``, or a crashed writer's
        temporary file); anything else is left to the operator."""
        tmp = _temporary(name)
        if tmp is not None:
            if tmp == os.getpid() or procinfo.is_running(tmp, None):
                return False             # a write in progress
        else:
            stem = name[:-len(".json")] if name.endswith(".json") else ""
            if records_mod.canonical_uuid(stem) != stem:
                return False
        try:
            return self._unlink(os.path.join(self.dir, name))
        except IsADirectoryError:
            return False
        except OSError as e:
            if e.errno in (errno.EISDIR, errno.EPERM):
                return False             # a directory planted there
            raise

    def temporaries(self) -> list[str]:
        try:
            return sorted(n for n in os.listdir(self.dir)
                          if _temporary(n) is not None)
        except OSError:
            return []


def _temporary(name: str) -> int | None:
    """The writer's pid of ``<uuid>.json.<pid>.tmp``; None for any other
    name."""
    parts = name.split(".")
    if len(parts) != 4 or parts[1] != "json" or parts[3] != "tmp" or \
            not parts[2].isdigit() or len(parts[2]) > 8 or \
            records_mod.canonical_uuid(parts[0]) != parts[0]:
        return None
    return int(parts[2])


def boot_id() -> str | None:
    try:
        with open(_BOOT_ID) as f:
            return f.read(64).strip() or None
    except OSError:
        return None


def now_ticks() -> tuple[int, int]:
    """(clock ticks since boot, ticks per second), the clock of a
    process's start time."""
    hz = os.sysconf("SC_CLK_TCK")
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * hz), hz


def qemu_start(run_dir: str, name: str) -> int | None:
    """The start of the running process libvirt's pid file of domain
    ``name`` names, if any."""
    try:
        path = os.path.join(run_dir, f"{naming.check_domain_name(name)}.pid")
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                     | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        text = os.read(fd, 32)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        pid = int(text.strip())
    except ValueError:
        return None
    if not 0 < pid <= records_mod.MAX_PID or not procinfo.is_running(
            pid, None):
        return None
    return procinfo.proc_start_time(pid)


def _read_lazily(records: records_mod.Records
                 ) -> Iterator[records_mod.Record]:
    """``records``' records, read from disk only once iterated."""
    yield from records.all()[0]


class Pending:
    """The rooms of one host, as its agent honours and sweeps them."""

    def __init__(self, state_path: str, run_dir: str, timeout: float):
        self.store = Rooms(state_path)
        self.run_dir = run_dir
        self.timeout = timeout

    @classmethod
    def of(cls, host: HostContext) -> Pending:
        """The rooms of ``host`` (a HostContext)."""
        s = host.settings
        return cls(host.records.state_path, s.libvirt_qemu_run_dir,
                   s.hook_timeout)

    def facts(self, rooms: Iterable[Room],
              recs: Iterable[records_mod.Record]) -> Facts:
        now, hz = now_ticks()
        names = {r.name for r in rooms}
        qemu = {}
        for name in names:
            start = qemu_start(self.run_dir, name)
            if start is not None:
                qemu[name] = start
        return Facts(boot_id(), now, hz,
                     frozenset(r.uuid for r in recs if r.alive()), qemu)

    def in_effect(self, recs: Iterable[records_mod.Record]) -> list[Room]:
        """The rooms that count now; ``recs``: the records read (and any
        not on disk that count all the same)."""
        rooms, _bad = self.store.all()
        if not rooms:
            return []
        facts = self.facts(rooms, recs)
        return [r for r in rooms if stale(r, facts, self.timeout) is None]

    def pending_starts(self, records: records_mod.Records) -> list[Room]:
        """The rooms in effect, for a writer of the PMD COS that is not
        the hook (nova-compute): the records are read only when there is
        a room, which is seldom."""
        return self.in_effect(_read_lazily(records))

    def sweep(self, recs: Iterable[records_mod.Record]
              ) -> tuple[list[str], list[str]]:
        """Remove stale rooms and what is not a room where nova-rdt writes
        them.  Returns (paths removed, "path: why" of what stays).  An
        OSError (a state path nova-compute may not write) is raised."""
        rooms, bad = self.store.all()
        facts = self.facts(rooms, recs)
        removed, kept = [], []
        for room in rooms:
            why = stale(room, facts, self.timeout)
            if why is None:
                continue
            if self.store.remove(room.uuid):
                removed.append(f"{self.store.dir}/{room.uuid}.json ({why})")
        for name, why in bad:
            path = os.path.join(self.store.dir, name)
            if self.store.remove_bad(name):
                removed.append(f"{path} (not a room: {why})")
            else:
                kept.append(f"{path}: {why}")
        for name in self.store.temporaries():
            if self.store.remove_bad(name):
                removed.append(os.path.join(self.store.dir, name))
        return removed, kept
