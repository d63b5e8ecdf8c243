"""Fixtures for tests on the Host lab (real libvirtd, QEMU, OVS-DPDK).

Labs are module-scoped: starting libvirtd costs seconds (QEMU's
capability probe), and each module's tests undo what they change.  The
probe result is shared by every lab in the session through one cache
directory.  When a test fails, the logs of every running lab are printed
with the failure and copied to ``$NOVA_RDT_LAB_LOGS`` (default
``/tmp/nova-rdt-lab-logs``).
"""

from __future__ import annotations

import os
import re

import pytest

from nova_rdt.emulator import mount as emulator_mount
from nova_rdt.lab import Lab
from nova_rdt.lab import libvirtd
from nova_rdt.lab import ovsdpdk

_ACTIVE_LABS: list[Lab] = []
KEPT_LOGS = os.environ.get("NOVA_RDT_LAB_LOGS", "/tmp/nova-rdt-lab-logs")


def lab_skip_reason(libvirt: bool = False, ovs: bool = False,
                    vnf: bool = False) -> str | None:
    if os.geteuid() != 0:
        return "the Host lab needs root (mount namespaces, libvirtd, OVS)"
    reasons = [emulator_mount.fuse_unavailable_reason()]
    if libvirt:
        reasons.append(libvirtd.libvirt_unavailable_reason())
    if ovs:
        reasons.append(ovsdpdk.ovs_dpdk_unavailable_reason())
    if vnf:
        reasons.append(ovsdpdk.testpmd_unavailable_reason())
    reasons = [r for r in reasons if r]
    return "; ".join(reasons) if reasons else None


#: The checkout these tests run from: ``nova-rdt lab`` runs from another
#: (fresh) working directory, as a user's first run does, and must still
#: import this tree's code.
CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
#: The lab's default report directory, relative to where it runs.
DEFAULT_OUT = "nova-rdt-lab-report"


def lab_env() -> dict[str, str]:
    """The environment for ``python -m nova_rdt.cmd.main`` run from a
    directory other than the checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (CHECKOUT, env.get("PYTHONPATH")) if p)
    return env


def skip_unless_nova_lab() -> None:
    """Skip, saying why, unless the lab's Nova scenarios can run here:
    root, FUSE, libvirtd, OVS-DPDK and Nova's functional framework."""
    reason = lab_skip_reason(libvirt=True, ovs=True)
    if reason:
        pytest.skip(reason)
    try:
        import nova.tests.functional.libvirt.base  # noqa: F401
    except ImportError as e:
        pytest.skip(f"Nova's functional framework is not importable: {e}")


@pytest.fixture(scope="session")
def libvirt_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("libvirt-cache"))


@pytest.fixture
def guests(lab):
    """Domain names a test defines on its module's ``lab``; destroyed
    and undefined after the test."""
    names: list[str] = []
    yield names
    for name in names:
        lab.libvirt.virsh("destroy", name, check=False)
        lab.libvirt.virsh("undefine", name, check=False)


def start_lab(**kw) -> Lab:
    lab = Lab(**kw)
    _ACTIVE_LABS.append(lab)
    return lab


def finish_lab(lab: Lab) -> None:
    lab.stop()
    _ACTIVE_LABS.remove(lab)
    leaks = lab.leaks()
    assert not leaks, f"the lab leaked: {leaks}"
    assert not lab.swept, f"teardown had to kill: {lab.swept}"


def prepared_lab(libvirt_cache: str, *, reserved_ways: int,
                 pmd_ways: int = 0, ovs: bool = False,
                 sync_pmd: bool = False, start_kw: dict | None = None,
                 **lab_kw):
    """A module's lab, started and prepared as nova-compute's start
    would (root group shrunk, the PMD COS synced when asked); a
    generator for a module-scoped fixture to ``yield from``."""
    from nova_rdt.host import prep as hostprep
    from tests.integration import hooklab

    reason = lab_skip_reason(libvirt=True, ovs=ovs)
    if reason:
        pytest.skip(reason)
    lab = start_lab(libvirt_cache_dir=libvirt_cache,
                    **({} if ovs else {"ovs": False}), **lab_kw)
    try:
        lab.start(**(start_kw or {}))
        hostprep.prepare(hooklab.fs(lab), reserved_ways=reserved_ways,
                         pmd_ways=pmd_ways)
        if sync_pmd:
            lab.agent().sync_pmd()
    except BaseException:
        finish_lab(lab)
        raise
    yield lab
    finish_lab(lab)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if not rep.failed or not _ACTIVE_LABS:
        return
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid)
    for i, lab in enumerate(_ACTIVE_LABS):
        kept = lab.keep_logs(os.path.join(KEPT_LOGS, safe, f"lab{i}"))
        rep.sections.append(
            (f"lab {lab.id} logs (kept in {kept})", lab.log_report()))
