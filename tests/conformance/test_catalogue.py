"""The conformance catalogue, on every kernel release it applies to.

Each case runs against the kernel model for every supported release in
its range; the cases marked ``fuse: true`` also run through a real FUSE
mount of the same model, on the oldest and newest release, to show the
adaptor adds nothing.
"""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
import tempfile
import threading
import time

import pytest

from nova_rdt.emulator import mount as emu_mount
from nova_rdt.emulator import profiles
from nova_rdt.emulator import versions
from tests.conformance import runner
from tests.kernel_fixtures import KERNELS
from tests.kernel_fixtures import FakeClock
from tests.kernel_fixtures import FakeTasks

CASES = runner.load()
FUSE_KERNELS = (KERNELS[0], KERNELS[-1])


def _params():
    for case in CASES:
        for v in case.versions():
            yield pytest.param(case, v, id=f"{case.id}@{v}")


@pytest.mark.parametrize("case, kernel", list(_params()))
def test_model(case, kernel):
    runner.run(case, runner.ModelTarget(
        case.raw.get("profile", "gold-6252"), kernel))


def test_catalogue_is_broad():
    """Over 100 cases, every concern covered, every case on some release
    and citing its kernel function."""
    assert len(CASES) > 100, len(CASES)
    by_file = collections.Counter(c.source for c in CASES)
    for part in ("schemata", "info", "modes", "pseudo_lock", "dirs",
                 "tasks", "cpus", "cdp", "mbps", "profiles", "kernfs"):
        assert by_file[f"{part}.yaml"] >= 3, (part, by_file)
    for c in CASES:
        assert c.versions(), f"{c.id}: no supported release in its range"
        assert c.raw["function"] and c.raw["file"]
    assert {c.raw.get("profile", "gold-6252") for c in CASES} >= \
        set(profiles.PROFILES)


# -- the FUSE sample ---------------------------------------------------------

def _real_threading():
    try:
        from eventlet import patcher
    except ImportError:
        return threading
    if patcher.is_monkey_patched("thread"):
        return patcher.original("threading")
    return threading


class _Mount:
    """One in-process FUSE mount whose model is swapped for each case.

    Entry and attribute caching are off, so a swapped model is never hidden
    behind the kernel's dcache."""

    def __init__(self):
        import mfusepy

        from nova_rdt.emulator import fusefs
        from nova_rdt.emulator.kernel import ResctrlKernel
        self._kernel_cls = ResctrlKernel
        self.tmp = tempfile.mkdtemp(prefix="nova-rdt-conformance-")
        self.mountpoint = os.path.join(self.tmp, "resctrl")
        os.mkdir(self.mountpoint)
        self.ops = fusefs.ResctrlFuse(self._new("gold-6252", KERNELS[0]))
        # A real OS thread and lock even when Nova's tests (imported at
        # collection) have monkey-patched threading: a green thread
        # blocked reading /dev/fuse would stop the whole process.
        real = _real_threading()
        self.ops._lock = real.Lock()
        self.thread = real.Thread(target=mfusepy.FUSE, kwargs=dict(
            operations=self.ops, mountpoint=self.mountpoint,
            foreground=True, nothreads=True, fsname="resctrl",
            direct_io=True, attr_timeout=0, entry_timeout=0,
            negative_timeout=0, default_permissions=True), daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not os.path.ismount(self.mountpoint):
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the conformance mount did not come up")
            time.sleep(0.02)

    def _new(self, profile, kernel):
        return self._kernel_cls(profiles.get(profile), clock=FakeClock(),
                                tasks=FakeTasks((101, 102, 103)),
                                kernel=versions.parse(kernel))

    def fresh(self, profile, kernel):
        with self.ops._lock:
            self.ops.kernel = self._new(profile, kernel)

    def close(self):
        tool = shutil.which("fusermount3") or shutil.which("fusermount")
        subprocess.run([tool, "-u", "-z", self.mountpoint], check=False,
                       capture_output=True)
        self.thread.join(timeout=10)
        shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def fuse_mount():
    reason = emu_mount.fuse_unavailable_reason()
    if reason:
        pytest.skip(f"FUSE emulator unavailable: {reason}")
    m = _Mount()
    yield m
    m.close()


def _fuse_params():
    for case in CASES:
        if not case.raw.get("fuse"):
            continue
        assert not case.uses_fake_tasks(), f"{case.id}: model-only ops"
        for v in case.versions():
            if v in FUSE_KERNELS:
                yield pytest.param(case, v, id=f"{case.id}@{v}")


@pytest.mark.fuse
@pytest.mark.parametrize("case, kernel", list(_fuse_params()))
def test_through_fuse(fuse_mount, case, kernel):
    runner.run(case, runner.FuseTarget(
        fuse_mount, case.raw.get("profile", "gold-6252"), kernel))


def test_fuse_sample_is_broad():
    assert len(list(_fuse_params())) >= 20
