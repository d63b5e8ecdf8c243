"""Helpers to drive the emulator's kernel model without FUSE."""

from __future__ import annotations

import errno
import os

import pytest

from nova_rdt.emulator import profiles
from nova_rdt.emulator.kernel import KernelError, ResctrlKernel


class FakeClock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> None:
        self.t += dt


class FakeTasks:
    """Threads that "exist" for the model, instead of /proc."""

    def __init__(self, tids=()):
        self.alive = set(tids)

    def exists(self, tid: int) -> bool:
        return tid in self.alive

    def all(self) -> list[int]:
        return sorted(self.alive)


def make_kernel(profile: str = "gold-6252", tids=(101, 102, 103)):
    clock, tasks = FakeClock(), FakeTasks(tids)
    k = ResctrlKernel(profiles.get(profile), clock=clock,
                      task_exists=tasks.exists, all_tasks=tasks.all)
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
