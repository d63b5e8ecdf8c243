"""Load the conformance catalogue and run a case against the emulator.

A case (one YAML mapping in ``catalogue/*.yaml``) is what the kernel's
source says one operation does, written from that source, not from the
emulator:

``id``
    unique name.
``function`` / ``file``
    the kernel function the rule comes from, and its file (under
    ``arch/x86/kernel/cpu/resctrl/`` before v6.16, ``fs/resctrl/`` since;
    ``fs/kernfs/`` and ``lib/`` as named).
``since`` / ``until``
    the first and last release for which the case holds (default: all).
``profile``
    the emulated host (default ``gold-6252``).
``setup``
    operations that must succeed first (or fail with their own
    ``errno``), to reach the state the case starts from.
``op``
    the operation under test.
``errno``
    the expected error name, or absent for success.
``status``
    ``info/last_cmd_status`` afterwards, exactly.
``result``
    what a ``read`` returns, exactly (``result_contains``: a substring;
    ``result_set``: a ``list``'s names, in any order).
``check`` / ``check_absent``
    file contents afterwards, exactly; paths that must not exist.

Operations: ``{mkdir: P}``, ``{rmdir: P}``, ``{rename: [OLD, NEW]}``,
``{write: P, data: S, caller: PID}``, ``{read: P, caller: PID}``,
``{list: P}``, ``{stat: P}`` (result: the permission bits, octal),
``{mkdir_many: PATTERN, count: N}`` (PATTERN with ``{}`` for 0..N-1),
``{fork: [PARENT, CHILD]}``, ``{exit: TID}``, ``{reuse: TID}``,
``{ns: {caller: PID, pids: {TID: VPID}}}`` (a caller in a child PID
namespace), ``{tick: SECONDS}``.  Threads 101, 102 and 103 exist.
"""

from __future__ import annotations

import dataclasses
import errno
import glob
import os

import yaml

from nova_rdt.emulator import versions
from nova_rdt.emulator.kernel import KernelError
from tests.kernel_fixtures import KERNELS
from tests.kernel_fixtures import make_kernel

HERE = os.path.dirname(os.path.abspath(__file__))
CATALOGUE = os.path.join(HERE, "catalogue")
TASK_OPS = ("fork", "exit", "reuse", "ns", "tick")
KEYS = {"id", "function", "file", "since", "until", "profile", "setup",
        "op", "errno", "status", "result", "result_contains", "result_set",
        "check", "check_absent", "note", "fuse", "count"}
OPS = {"mkdir", "mkdir_many", "rmdir", "rename", "write", "read", "list",
       "stat", "fork", "exit", "reuse", "ns", "tick"}


@dataclasses.dataclass
class Case:
    raw: dict
    source: str

    @property
    def id(self) -> str:
        return self.raw["id"]

    def versions(self) -> list[str]:
        since = versions.parse(self.raw.get("since", KERNELS[0]))
        until = self.raw.get("until")
        until = versions.parse(until) if until else None
        return [v for v in KERNELS
                if versions.parse(v) >= since
                and (until is None or versions.parse(v) <= until)]

    def uses_fake_tasks(self) -> bool:
        """Cases naming thread ids need the model's fake threads."""
        for op in self.raw.get("setup", []) + [self.raw["op"]]:
            if any(k in op for k in TASK_OPS) or "caller" in op:
                return True
            for key in ("write", "read"):
                if str(op.get(key, "")).endswith("tasks"):
                    return True
        return False


def load() -> list[Case]:
    cases, seen = [], set()
    for path in sorted(glob.glob(os.path.join(CATALOGUE, "*.yaml"))):
        with open(path) as f:
            doc = yaml.safe_load(f) or []
        for raw in doc:
            problems = sorted(set(raw) - KEYS)
            assert not problems, f"{path}: {raw.get('id')}: keys {problems}"
            for need in ("id", "function", "file", "op"):
                assert need in raw, f"{path}: {raw.get('id')}: no {need}"
            assert raw["id"] not in seen, f"duplicate case id {raw['id']}"
            for op in raw.get("setup", []) + [raw["op"]]:
                assert set(op) & OPS, f"{raw['id']}: unknown op {op}"
            seen.add(raw["id"])
            cases.append(Case(raw, os.path.basename(path)))
    return cases


# -- against the model -------------------------------------------------------

class ModelTarget:
    """The kernel model, called directly."""

    def __init__(self, profile: str, kernel: str):
        self.k, self.clock, self.tasks = make_kernel(profile, kernel=kernel)

    def do(self, op: dict):
        k, caller = self.k, op.get("caller", 101)
        if "mkdir_many" in op:
            for i in range(op["count"]):
                k.mkdir(op["mkdir_many"].format(i))
            return None
        if "mkdir" in op:
            return k.mkdir(op["mkdir"])
        if "rmdir" in op:
            return k.rmdir(op["rmdir"])
        if "rename" in op:
            return k.rename(*op["rename"])
        if "write" in op:
            return k.write(op["write"], _data(op), caller)
        if "read" in op:
            return k.read(op["read"], caller)
        if "list" in op:
            return k.listdir(op["list"])
        if "stat" in op:
            return f"{k.stat(op['stat'])[1]:o}"
        if "fork" in op:
            return self.tasks.fork(*op["fork"])
        if "exit" in op:
            return self.tasks.exit(op["exit"])
        if "reuse" in op:
            return self.tasks.reuse(op["reuse"])
        if "ns" in op:
            ns = op["ns"]
            self.tasks.namespaces[ns["caller"]] = {
                int(t): int(v) for t, v in ns["pids"].items()}
            return None
        if "tick" in op:
            return self.clock.advance(op["tick"])
        raise AssertionError(f"unknown op {op}")

    def status(self) -> str:
        return self.k.last_cmd_status()

    def read(self, path: str) -> str:
        return self.k.read(path, 101)

    def exists(self, path: str) -> bool:
        try:
            self.k.stat(path)
        except KernelError:
            return False
        return True


def _data(op: dict) -> bytes:
    data = op.get("data", "")
    if isinstance(data, dict):          # {repeat: "x", times: N}
        data = data["repeat"] * data["times"]
    return data.encode("latin-1")


def run(case: Case, target) -> None:
    """Set up, run the op, check the outcome; AssertionError on mismatch."""
    raw = case.raw
    for step in raw.get("setup", []):
        want = step.get("errno")
        got = _outcome(target, step)
        assert got[0] == want, (
            f"setup step {step}: expected {want or 'success'}, got "
            f"{got[0] or 'success'}")
    err, result = _outcome(target, raw["op"])
    assert err == raw.get("errno"), (
        f"op {raw['op']}: expected {raw.get('errno') or 'success'}, got "
        f"{err or 'success'}; last_cmd_status {target.status()!r}")
    if "status" in raw:
        assert target.status() == raw["status"], (
            f"last_cmd_status {target.status()!r} != {raw['status']!r}")
    if "result" in raw:
        assert result == raw["result"], f"result {result!r}"
    if "result_contains" in raw:
        assert raw["result_contains"] in result, f"result {result!r}"
    if "result_set" in raw:
        assert sorted(result) == sorted(raw["result_set"]), \
            f"result {result!r}"
    for path, want in (raw.get("check") or {}).items():
        got = target.read(path)
        assert got == want, f"{path}: {got!r} != {want!r}"
    for path in raw.get("check_absent") or []:
        assert not target.exists(path), f"{path} exists"


def _outcome(target, op: dict):
    try:
        return None, target.do(op)
    except KernelError as e:
        return errno.errorcode[e.errno], None
    except OSError as e:
        return errno.errorcode[e.errno], None


# -- through FUSE ------------------------------------------------------------

class FuseTarget:
    """The same model behind a real FUSE mount, driven with syscalls."""

    def __init__(self, mount, profile: str, kernel: str):
        self.mount = mount
        mount.fresh(profile, kernel)

    def _p(self, path: str) -> str:
        return os.path.join(self.mount.mountpoint, path)

    def do(self, op: dict):
        if "mkdir_many" in op:
            for i in range(op["count"]):
                os.mkdir(self._p(op["mkdir_many"].format(i)))
            return None
        if "mkdir" in op:
            return os.mkdir(self._p(op["mkdir"]))
        if "rmdir" in op:
            return os.rmdir(self._p(op["rmdir"]))
        if "rename" in op:
            return os.rename(*(self._p(p) for p in op["rename"]))
        if "write" in op:
            fd = os.open(self._p(op["write"]), os.O_WRONLY)
            try:
                os.write(fd, _data(op))
            finally:
                os.close(fd)
            return None
        if "read" in op:
            return self.read(op["read"])
        if "list" in op:
            return os.listdir(self._p(op["list"]))
        if "stat" in op:
            return f"{os.stat(self._p(op['stat'])).st_mode & 0o7777:o}"
        raise AssertionError(f"not a FUSE op: {op}")

    def status(self) -> str:
        return self.read("info/last_cmd_status")

    def read(self, path: str) -> str:
        with open(self._p(path), "rb") as f:
            return f.read().decode("latin-1")

    def exists(self, path: str) -> bool:
        return os.path.lexists(self._p(path))
