"""Helpers to drive the emulator's kernel model without FUSE."""

from __future__ import annotations

import errno
import os

import pytest

from nova_rdt.emulator import profiles
from nova_rdt.emulator import versions
from nova_rdt.emulator.kernel import KernelError
from nova_rdt.emulator.kernel import ResctrlKernel
from nova_rdt.emulator.taskspace import Thread

#: Every kernel release the emulator is tested as.
KERNELS = versions.SUPPORTED


class FakeClock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> None:
        self.t += dt


class FakeTasks:
    """Threads that "exist" for the model, instead of /proc.

    ``live`` is the set of tids (in the server's namespace); ``parents``
    maps a tid to its creator; ``namespaces`` maps a caller pid to
    {tid: number in the caller's namespace} for callers in a child PID
    namespace (callers not listed share the server's namespace).
    """

    def __init__(self, tids=()):
        self.live = set(tids)
        self.parents: dict[int, int] = {}
        self.starts: dict[int, int] = {}
        self.namespaces: dict[int, dict[int, int]] = {}

    def fork(self, parent: int, child: int) -> None:
        self.live.add(child)
        self.parents[child] = parent

    def exit(self, tid: int) -> None:
        self.live.discard(tid)

    def reuse(self, tid: int) -> None:
        """The tid dies and a new, unrelated thread gets the number."""
        self.starts[tid] = self.starts.get(tid, 0) + 1
        self.parents.pop(tid, None)

    def tids(self) -> dict[int, int]:
        return {t: t for t in self.live}

    def info(self, tid: int) -> Thread | None:
        if tid not in self.live:
            return None
        return Thread(tid, self.parents.get(tid, 0), self.starts.get(tid, 0),
                      tid)

    def alive(self, tid: int) -> bool:
        return tid in self.live

    def resolve(self, caller: int, vpid: int) -> int | None:
        ns = self.namespaces.get(caller)
        if ns is None:
            return vpid if vpid in self.live else None
        back = {v: t for t, v in ns.items() if t in self.live}
        return back.get(vpid)

    def vnr(self, caller: int, tid: int) -> int:
        ns = self.namespaces.get(caller)
        return tid if ns is None else ns.get(tid, 0)


def make_kernel(profile: str = "gold-6252", tids=(101, 102, 103),
                kernel: str = "6.1"):
    clock, tasks = FakeClock(), FakeTasks(tids)
    k = ResctrlKernel(profiles.get(profile), clock=clock, tasks=tasks,
                      kernel=kernel)
    return k, clock, tasks


def expect_error(kernel: ResctrlKernel, err: int, status: str | None,
                 fn, *args):
    """Assert the call fails with ``err`` and last_cmd_status ``status``."""
    with pytest.raises(KernelError) as exc:
        fn(*args)
    assert exc.value.errno == err, (errno.errorcode[exc.value.errno], status)
    if status is not None:
        assert kernel.last_cmd_status() == status
    return exc.value


def materialize(kernel: ResctrlKernel, root: str, path: str = "") -> str:
    """Copy every readable file of the model into a plain directory tree.

    A snapshot is enough for code that only reads resctrl (discovery,
    host view, monitoring), and needs no FUSE.
    """
    target = os.path.join(root, path) if path else root
    os.makedirs(target, exist_ok=True)
    for name in kernel.listdir(path):
        child = f"{path}/{name}" if path else name
        kind, _ = kernel.stat(child)
        if kind == "dir":
            materialize(kernel, root, child)
        else:
            with open(os.path.join(root, child), "w") as f:
                f.write(kernel.read(child))
    return root
