"""The threads the emulator sees, and how a caller's PID namespace names them.

The kernel resolves a pid written to ``tasks`` with find_task_by_vpid(),
in the writer's PID namespace, and lists a group's tasks with
task_pid_vnr(), in the reader's, leaving out threads the reader cannot
see.  The FUSE request carries the caller's pid as the server sees it;
:class:`HostTasks` maps between that pid's namespace and the server's own
through ``/proc/<pid>/status`` (``NSpid``) and ``/proc/<pid>/ns/pid``.

A thread inherits its creator's group at fork.  The emulator cannot watch
forks, so a thread it has not seen before takes the group of its parent
(the thread-group leader for a thread, ``PPid`` for a process) when it is
first seen; :attr:`Thread.start` tells a reused tid from the old one.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
from typing import Protocol

NS_GET_PARENT = 0xB702          # _IO(0xb7, 0x2), <linux/nsfs.h>


@dataclasses.dataclass(frozen=True)
class Thread:
    tid: int
    parent: int                 # creator's tid (leader or PPid); 0 if none
    start: int                  # start time, to tell a reused tid apart
    leader: int = 0             # thread-group leader (the process's pid)


class TaskSpace(Protocol):
    def tids(self) -> dict[int, int]:
        """Every live thread: tid -> its thread-group leader, in the
        server's namespace.  Cheap: no per-thread reads."""

    def info(self, tid: int) -> Thread | None:
        """One thread's parent and start time; None once it is gone."""

    def alive(self, tid: int) -> bool:
        """Cheap liveness check for one thread."""

    def resolve(self, caller: int, vpid: int) -> int | None:
        """find_task_by_vpid() in ``caller``'s namespace: a tid or None."""

    def vnr(self, caller: int, tid: int) -> int:
        """task_pid_vnr() for ``caller``: the tid's number there, 0 if
        ``caller`` cannot see it."""


class HostTasks:
    """The real threads, through /proc."""

    def __init__(self, proc: str = "/proc"):
        self.proc = proc
        self._own_ns = self._ns_id(os.getpid())

    # -- threads ------------------------------------------------------------

    def alive(self, tid: int) -> bool:
        return tid > 0 and os.path.exists(f"{self.proc}/{tid}")

    def tids(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for pid in os.listdir(self.proc):
            if not pid.isdigit():
                continue
            try:
                tids = os.listdir(f"{self.proc}/{pid}/task")
            except OSError:
                continue
            leader = int(pid)
            for t in tids:
                out[int(t)] = leader
        return out

    def info(self, tid: int) -> Thread | None:
        leader = self._leader(tid)
        if leader is None:
            return None
        start = self._start(leader, tid)
        if start is None:
            return None
        parent = leader if tid != leader else self._ppid(leader)
        return Thread(tid, parent, start, leader)

    def _leader(self, tid: int) -> int | None:
        tgid = self._status(tid).get("Tgid")
        return int(tgid[0]) if tgid else None

    def _start(self, pid: int, tid: int) -> int | None:
        try:
            with open(f"{self.proc}/{pid}/task/{tid}/stat") as f:
                # Field 22, after the parenthesised comm (which may hold
                # spaces and parentheses itself).
                return int(f.read().rsplit(")", 1)[1].split()[19])
        except (OSError, IndexError, ValueError):
            return None

    def _ppid(self, pid: int) -> int:
        return int(self._status(pid).get("PPid", ["0"])[0])

    def _status(self, pid: int,
                tid: int | None = None) -> dict[str, list[str]]:
        path = (f"{self.proc}/{pid}/task/{tid}/status" if tid
                else f"{self.proc}/{pid}/status")
        out: dict[str, list[str]] = {}
        try:
            with open(path) as f:
                for line in f:
                    key, _, rest = line.partition(":")
                    out[key] = rest.split()
        except OSError:
            pass
        return out

    # -- namespaces ---------------------------------------------------------

    def _ns_id(self, pid: int) -> tuple[int, int] | None:
        try:
            st = os.stat(f"{self.proc}/{pid}/ns/pid")
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def _same_ns(self, caller: int) -> bool:
        # A caller the server cannot see (pid 0) is taken to be in the
        # server's namespace: the kernel would know better; FUSE does not
        # tell us.
        return caller <= 0 or self._ns_id(caller) in (None, self._own_ns)

    def _nspid(self, pid: int, tid: int | None = None) -> list[int]:
        return [int(x) for x in self._status(pid, tid).get("NSpid", [])]

    def _ancestor_ns(self, tid: int, up: int) -> tuple[int, int] | None:
        """The id of the PID namespace ``up`` levels above ``tid``'s."""
        try:
            fd = os.open(f"{self.proc}/{tid}/ns/pid", os.O_RDONLY)
        except OSError:
            return None
        try:
            for _ in range(up):
                parent = fcntl.ioctl(fd, NS_GET_PARENT)
                os.close(fd)
                fd = parent
            st = os.fstat(fd)
            return st.st_dev, st.st_ino
        except OSError:
            return None
        finally:
            os.close(fd)

    def _sees(self, caller: int, tid: int) -> int:
        """The tid's number in caller's namespace, or 0."""
        mine = self._nspid(caller)
        theirs = self._nspid(tid)
        depth = len(mine) - 1
        if depth < 0 or len(theirs) <= depth:
            return 0
        if self._ancestor_ns(tid, len(theirs) - len(mine)) != \
                self._ns_id(caller):
            return 0
        return theirs[depth]

    def resolve(self, caller: int, vpid: int) -> int | None:
        if vpid <= 0:
            return None
        if self._same_ns(caller):
            return vpid if self.alive(vpid) else None
        for tid in self.tids():
            if self._nspid(tid)[-1:] == [vpid] and \
                    self._sees(caller, tid) == vpid:
                return tid
        return None

    def vnr(self, caller: int, tid: int) -> int:
        if self._same_ns(caller):
            return tid
        return self._sees(caller, tid)
