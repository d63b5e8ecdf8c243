"""Crash anywhere, reconcile, and the host is as if nothing happened.

Any sequence of operations (spawn, delete, migrate in and out, a PMD
update, class members, a VM dying with libvirtd down) is run twice on
the emulated resctrl: once clean, tracing the failpoints each operation
passes, then with a crash injected at one of them (a random operation,
point and n-th pass; the final reconcile counts as one).  After the crash
``nova-rdt reconcile`` runs (again, if the crash was in reconcile), then
the rest of the sequence, then reconcile.  Both runs must end with no
promise broken (no group or record outliving its VM, no claim of ways by
nobody, a valid PMD COS covering every sharing VM, no foreign group
touched), and in the same state, except for what belongs to the VM
whose operation was cut short.
"""

from __future__ import annotations

from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import pytest

from nova_rdt import failpoints
from nova_rdt.emulator import mount as emu_mount
from tests.unit import test_recovery_host as th

pytestmark = pytest.mark.fuse

# The points a host-side operation or reconcile can pass; the driver's
# are nova-compute's (tests/functional/nova/test_recovery_nova.py).
POINTS = sorted(n for n in failpoints.REGISTRY
                if n.split(".")[0] in ("agent", "records", "reconcile"))

OPS = st.one_of(
    st.tuples(st.just("spawn"), st.booleans(), st.booleans()),
    st.tuples(st.just("delete"), st.integers(0, 5)),
    st.tuples(st.just("migrate_in"), st.booleans()),
    st.tuples(st.just("migrate_out"), st.integers(0, 5)),
    st.tuples(st.just("pmd_update")),
    st.tuples(st.just("vm_crash"), st.integers(0, 5)),
)


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    reason = emu_mount.fuse_unavailable_reason()
    if reason:
        pytest.skip(f"FUSE emulator unavailable: {reason}")
    emu = th.new_emulator(str(tmp_path_factory.mktemp("emu")))
    h = th.Host(str(tmp_path_factory.mktemp("host")), emu)
    yield h
    failpoints.disarm()
    h.kill_all()
    emu.stop()
    th.fusermount_uz(emu.mountpoint)


def _apply(h: th.Host, op, n: int) -> str | None:
    """Run one operation; the VM it is about, if any."""
    kind = op[0]
    if kind in ("spawn", "migrate_in"):
        share = op[1]
        cls = op[2] if kind == "spawn" else False
        live = [vm for vm in h.vms.values() if not vm.rdt_class]
        if not cls and len(live) >= 4:        # room on 7 managed ways
            return None
        name = f"vm{n}"
        h.start(name, share=share and not cls,
                rdt_class=th.CLASS if cls else None)
        return name
    if kind in ("delete", "migrate_out"):
        if not h.vms:
            return None
        name = sorted(h.vms)[op[1] % len(h.vms)]
        h.stop(name)
        return name
    if kind == "vm_crash":           # QEMU dies with libvirtd down
        if not h.vms:
            return None
        name = sorted(h.vms)[op[1] % len(h.vms)]
        h.crash(name)
        return name
    h.agent().sync_pmd()
    return None


def _run(h: th.Host, ops, crash=None) -> tuple[str | None, list]:
    """Run ``ops``; with ``crash=(index, point, nth)`` the point is armed
    for that operation and the reconcile after it.  Returns the VM whose
    operation was cut short (None if none was), and per operation the
    points it passed, with how often (a clean run traces them)."""
    th.reset(h)
    cut = None
    passed = []
    for i, op in enumerate(ops):
        if crash is None or crash[0] != i:
            with failpoints.armed({p: "trace" for p in POINTS}):
                _apply(h, op, i)
                passed.append({p: n for p, n in failpoints.counts().items()
                               if n})
            continue
        _, point, nth = crash
        fired = False
        with failpoints.armed({point: f"{nth}*raise"}):
            name = None
            try:
                name = _apply(h, op, i)
            except failpoints.FailpointError:
                fired = True
                name = _vm_of(h, op, i)
            try:
                h.reconcile()
            except failpoints.FailpointError:
                fired = True
        h.reconcile()                 # nova-compute's restart, or by hand
        if fired:
            cut = name
    # The final reconcile is a crash point of its own (index len(ops)).
    if crash is not None and crash[0] == len(ops):
        with failpoints.armed({crash[1]: f"{crash[2]}*raise"}):
            try:
                h.reconcile()
            except failpoints.FailpointError:
                pass
    with failpoints.armed({p: "trace" for p in POINTS}):
        h.reconcile()
        passed.append({p: n for p, n in failpoints.counts().items() if n})
    return cut, passed


def _vm_of(h, op, i):
    if op[0] in ("spawn", "migrate_in"):
        return f"vm{i}"
    return None


def _without(snapshot: dict, vm: str | None, pmd_too: bool) -> dict:
    if vm is None:
        return snapshot
    groups = {g: m for g, m in snapshot["groups"].items()
              if f"-{vm}-vcpus_" not in g
              and not (pmd_too and g in ("nova-rdt-pmd",
                                         "nova-rdt-class-" + th.CLASS))}
    return {"groups": groups,
            "records": [r for r in snapshot["records"] if r != vm]}


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(ops=st.lists(OPS, min_size=1, max_size=5), data=st.data())
def test_any_crash_then_reconcile_converges(host, ops, data):
    _cut, passed = _run(host, ops)
    assert host.leaks() == [], "the clean run itself breaks a promise"
    clean = host.snapshot()
    clean_vms = {n: (vm.share, vm.rdt_class) for n, vm in host.vms.items()}
    # Every (operation, point, n-th pass) the clean run went through,
    # its final reconcile included.
    candidates = sorted(
        (i, p, n) for i, seen in enumerate(passed)
        for p, hits in seen.items() for n in range(1, min(hits, 2) + 1))
    if not candidates:
        return                      # nothing written: nothing to cut
    crash = data.draw(st.sampled_from(candidates), label="crash")
    cut, _ = _run(host, ops, crash)
    assert host.leaks() == []
    crashed = host.snapshot()
    if cut is None:
        assert crashed == clean
        return
    # The cut VM's own group and record may differ, and so may the PMD
    # COS and class group it was joining.
    share_or_class = any(clean_vms.get(cut, (False, None)))
    assert _without(crashed, cut, share_or_class) == \
        _without(clean, cut, share_or_class)


def test_every_host_side_point_is_in_the_draw():
    assert {"agent.between_schemata_and_record", "agent.pmd_update",
            "agent.class_update", "records.write", "records.rename",
            "reconcile.remove"} <= set(POINTS)
