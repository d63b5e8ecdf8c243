"""Named failpoints at every step where nova-rdt writes state.

A failpoint is a named place between two state writes (a claim and a
domain definition, a schemata write and a record, a temp file and its
rename) where a test or the faults lab can make the process raise, exit
or hang, to prove that ``nova-rdt reconcile`` and nova-compute's start
converge from a crash there.  The idea is etcd's gofail and FreeBSD's
fail(9); the points are enumerated the way ALICE and CrashMonkey
enumerate crash points of a file system.

Off, :func:`hit` costs one dict lookup.  Arming:

* ``NOVA_RDT_FAILPOINTS="name=action[;name=action...]"`` in the
  environment, read once at import; ``action`` is ``raise``, ``exit``
  or ``hang``, optionally prefixed ``N*`` to fire on the N-th hit only,
  or ``trace``, which only counts the hits (:func:`counts`): how a
  harness learns which points an operation passes, to crash at each;
  or ``die``, for a service run inside a test harness's process, where
  ``exit`` would end the harness too: it raises :class:`FailpointDied`,
  which no ``except Exception`` of the service catches, so the service's
  code stops at the point as if its process had ended;
* :func:`arm` / :func:`disarm`, and :func:`armed` as a context manager
  for tests.

A bad environment value is said once on stderr, naming the variable,
and ignored: a typo in a service's environment must never take the
service down.  A bad value given to :func:`arm` raises, since a test
that arms a point that does not exist would prove nothing.

A leaf module: the standard library only, so every layer may import it.
"""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Mapping
import contextlib
import os
import sys
import threading
import time

from nova_rdt import exception

ENV = "NOVA_RDT_FAILPOINTS"
# Distinct from any exit status nova-rdt or Python gives on its own, so a
# harness can tell "killed at the failpoint" from "failed".
EXIT_CODE = 86
ACTIONS = ("raise", "exit", "hang", "trace", "die")

REGISTRY: dict[str, str] = {
    # The driver (nova-compute).
    "driver.after_claim":
        "after the driver's claim of ways, before the domain XML is used "
        "to define the domain",
    "driver.after_define":
        "after libvirt defined (and started) the domain, before Nova "
        "records the instance as active",
    "driver.before_enforce":
        "after libvirt started the domain paused with its own choice of "
        "ways, before the driver writes the decided masks and resumes it",
    "migration.dest_claim":
        "on the destination, in pre_live_migration, after its reservation "
        "of the incoming instance's ways, before Nova prepares the "
        "destination",
    "migration.before_xml_rewrite":
        "on the source, before the destination XML is rewritten with the "
        "destination's RDT elements",
    "migration.after_xml_rewrite":
        "on the source, after the rewrite, before libvirt migrates the "
        "domain",
    "migration.source_release":
        "on the source, before its claim of a domain that moved away is "
        "released",
    # The hook and the agent (libvirtd's hook, nova-rdt reconcile).
    "agent.between_schemata_and_record":
        "in the hook's 'started', after libvirt's group of the domain was "
        "written (and the hook's MBps line), before the hook's record of "
        "the domain is written",
    "agent.write_decided":
        "in the hook's 'started', after the decided masks were checked, "
        "before they are written into libvirt's group of the domain",
    "agent.after_record":
        "in the hook's 'started', after the record, before the class and "
        "PMD writes that follow it",
    "agent.release_before_record":
        "in the hook's 'release', before the domain's record is removed",
    "agent.class_update":
        "creating a class group, after mkdir, before its schemata write",
    "agent.class_join":
        "joining a class group, after the group is ready, before the "
        "domain's tasks are moved into it",
    "agent.pmd_update":
        "in a PMD COS update, after the plan, before the PMD group's "
        "schemata write",
    "agent.pmd_cpus":
        "in a PMD COS update, after the schemata write, before the PMD "
        "cores are written to cpus_list",
    # Records (every state file nova-rdt writes goes through them).
    "records.write":
        "after the temporary file is written and synced, before the rename "
        "that publishes it",
    "records.rename":
        "after the rename, before the directory is synced",
    "records.remove":
        "before a record file is unlinked",
    # Reconcile.
    "reconcile.remove":
        "in reconcile, before each removal of a dead domain's group",
    "reconcile.restore_group":
        "in reconcile, before re-creating the group of a running domain "
        "that resctrl lost (mkdir, schemata, tasks follow)",
    "reconcile.drop_record":
        "in reconcile, after a dead domain's group is gone, before its "
        "record is dropped",
}


class FailpointError(exception.NovaRdtError, RuntimeError):
    """Raised by an armed failpoint; the message names it."""

    def __init__(self, name: str):
        super().__init__(f"failpoint {name} fired")
        self.name = name


class FailpointDied(BaseException):
    """The ``die`` action: an in-process stand-in for the process ending
    at the point (a BaseException, so the service cannot recover)."""

    def __init__(self, name: str):
        super().__init__(f"failpoint {name} fired: died")
        self.name = name


class FailpointConfigError(exception.NovaRdtError, ValueError):
    """An arming value that does not parse; the message says where."""


class _Arm:
    __slots__ = ("action", "nth", "hits")

    def __init__(self, action: str, nth: int | None):
        self.action = action
        self.nth = nth
        self.hits = 0


_armed: dict[str, _Arm] = {}
_lock = threading.Lock()


def parse(text: str) -> dict[str, tuple[str, int | None]]:
    """``name=[N*]action;...`` -> {name: (action, N or None)}."""
    out: dict[str, tuple[str, int | None]] = {}
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        name, sep, spec = part.partition("=")
        name, spec = name.strip(), spec.strip()
        if not sep or not name:
            raise FailpointConfigError(f"{part!r} is not name=action")
        if name not in REGISTRY:
            raise FailpointConfigError(f"{name!r} is not a failpoint")
        nth: int | None = None
        if "*" in spec:
            count, _, spec = spec.partition("*")
            count, spec = count.strip(), spec.strip()
            if not count.isdigit() or int(count) < 1:
                raise FailpointConfigError(
                    f"{name}: count {count!r} is not a number >= 1")
            nth = int(count)
        if spec not in ACTIONS:
            raise FailpointConfigError(
                f"{name}: action {spec!r} is not one of {', '.join(ACTIONS)}")
        out[name] = (spec, nth)
    return out


def arm(points: Mapping[str, str] | str) -> None:
    """Arm points, from a mapping ``{name: "[N*]action"}`` or the env
    variable's syntax; FailpointConfigError names a bad one."""
    if not isinstance(points, str):
        points = ";".join(f"{k}={v}" for k, v in points.items())
    parsed = parse(points)
    with _lock:
        for name, (action, nth) in parsed.items():
            _armed[name] = _Arm(action, nth)


def disarm(*names: str) -> None:
    """Disarm ``names``, or every point without arguments."""
    with _lock:
        if not names:
            _armed.clear()
        for name in names:
            _armed.pop(name, None)


@contextlib.contextmanager
def armed(points: Mapping[str, str] | str) -> Iterator[None]:
    """Arm ``points`` for the ``with`` body, then restore what was armed."""
    with _lock:
        saved = dict(_armed)
    arm(points)
    try:
        yield
    finally:
        with _lock:
            _armed.clear()
            _armed.update(saved)


def active() -> dict[str, str]:
    """What is armed now, as ``{name: "[N*]action"}``."""
    with _lock:
        return {n: (f"{a.nth}*" if a.nth else "") + a.action
                for n, a in _armed.items()}


def counts() -> dict[str, int]:
    """How often each armed point was passed since it was armed."""
    with _lock:
        return {n: a.hits for n, a in _armed.items()}


def hit(name: str) -> None:
    """Pass the failpoint ``name``: nothing unless it is armed."""
    arm_ = _armed.get(name)
    if arm_ is None:
        return
    with _lock:
        arm_.hits += 1
        if arm_.action == "trace" or \
                (arm_.nth is not None and arm_.hits != arm_.nth):
            return
    if arm_.action == "raise":
        raise FailpointError(name)
    if arm_.action == "die":
        raise FailpointDied(name)
    if arm_.action == "exit":
        # Say it before dying: the harness's logs then name the point.
        try:
            sys.stderr.write(f"nova-rdt: failpoint {name} fired: exit "
                             f"{EXIT_CODE}\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os._exit(EXIT_CODE)
    # hang: until killed (the harness's SIGKILL), as a stuck write would.
    while True:
        time.sleep(3600)


def _arm_from_env() -> None:
    text = os.environ.get(ENV)
    if not text:
        return
    try:
        arm(text)
    except FailpointConfigError as e:
        try:
            sys.stderr.write(f"nova-rdt: ignoring {ENV}: {e}\n")
        except (OSError, ValueError):
            pass


_arm_from_env()
