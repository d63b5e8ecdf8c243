"""A domain started without nova-compute gets the room a compute start
gets (issue 38), with the real libvirtd and the installed hook.

libvirt runs the ``prepare`` hook in ``qemuProcessInit``, before
``qemuProcessLaunch`` calls ``qemuProcessResctrlCreate``: there the hook
keeps the domain's ways out of the PMD COS for the moment, as the
compute's start does (:meth:`Placer.make_room`).  libvirt's allocator
counts every group's ways as used, and the PMD COS, which must stay one
run, keeps covering the ways a sharer in the middle left.

An emulated gold-6252 (11 ways per cache id): the host keeps ways 0-1,
the PMD base is ways 9-10.  No OVS runs: the PMD COS holds no cores and
its rule holds on every cache id.  Domains carry nova-rdt's metadata,
without decided masks (the hook places them), and are started by hand.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys

import pytest

from tests.integration import hooklab
from tests.integration.conftest import prepared_lab

WAY_KIB = 36608 // 11
PMD = "nova-rdt-pmd"


@pytest.fixture(scope="module")
def lab(libvirt_cache):
    yield from prepared_lab(
        libvirt_cache, reserved_ways=2, pmd_ways=2, profile="gold-6252",
        hook={"pmd_cos": True, "reserved_host_ways": 2,
              "pmd_shared_ways": 2})


def _start(lab, guests, name, ways, share):
    guests.append(name)
    lab.libvirt.define(hooklab.managed_domain(
        lab, name, cache_kib=ways * WAY_KIB, pmd_share=share, ways=ways))
    lab.libvirt.start_domain(name, paused=False)


def _l3(lab, group):
    return hooklab.schemata(lab, group).get("L3", 0)


def _sharers_and_a_plain_one(lab, guests):
    """s1 (2 ways) and s2 (3) share next to the 2-way base; a plain p1
    (2 ways) fills the cache."""
    _start(lab, guests, "s1", 2, True)
    hooklab.eventually(lambda: _l3(lab, PMD) == 0x780)
    _start(lab, guests, "s2", 3, True)
    hooklab.eventually(lambda: _l3(lab, PMD) == 0x7f0)
    _start(lab, guests, "p1", 2, False)
    hooklab.eventually(
        lambda: _l3(lab, hooklab.group_of(lab, "p1")) == 0x00c)


def test_a_sharer_started_by_hand_gets_the_ways_a_stopped_one_left(
        lab, guests):
    _sharers_and_a_plain_one(lab, guests)
    assert _l3(lab, hooklab.group_of(lab, "s1")) == 0x180
    assert _l3(lab, hooklab.group_of(lab, "s2")) == 0x070

    lab.libvirt.destroy("s1")
    # One run over the base and s2: s1's ways stay the PMDs'.
    assert _l3(lab, PMD) == 0x7f0

    # Two ways are free (s1's), inside the PMD span: libvirt's allocator
    # finds them only once the prepare hook took them out of it.  s3
    # starts at once: s1's release hook (which re-derives the PMD COS)
    # may still run in the background, and honours the room s3's
    # prepare made (it used to put the ways back: "Not enough room").
    _start(lab, guests, "s3", 2, True)
    hooklab.eventually(
        lambda: _l3(lab, hooklab.group_of(lab, "s3")) == 0x180
        and _l3(lab, PMD) == 0x7f0)
    # The plain 2-way also starts again where it was, after a stop.
    lab.libvirt.destroy("p1")
    lab.libvirt.start_domain("p1", paused=False)
    hooklab.eventually(
        lambda: _l3(lab, hooklab.group_of(lab, "p1")) == 0x00c)
    assert hooklab.hook_errors(lab) == []


@contextlib.contextmanager
def _hooks_delayed(lab, release_of: str, prepare_of: str):
    """The hook's interpreter, for a moment: ``release_of``'s release
    waits 1 s before it runs (its process exists from libvirt's call on,
    as the shim's background job does), and ``prepare_of``'s prepare
    returns to libvirt 2 s after its work.  The release then runs
    between that prepare and libvirt's allocation, every time."""
    wrapper = os.path.join(lab.base, "hook-python")
    with open(wrapper) as f:
        saved = f.read()
    path = os.pathsep.join(
        os.path.abspath(p) for p in
        os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    env = "PYTHONPATH=" + shlex.quote(path) if path else ""
    py = shlex.quote(sys.executable)
    with open(wrapper + ".new", "w") as f:
        f.write(f"""#!/bin/sh
case "$*" in
    *"-- {release_of} release "*) sleep 1 ;;
    *"-- {prepare_of} prepare "*)
        {env} {py} "$@"; rc=$?; sleep 2; exit $rc ;;
esac
{env} exec {py} "$@"
""")
    os.chmod(wrapper + ".new", 0o755)
    os.replace(wrapper + ".new", wrapper)
    try:
        yield
    finally:
        with open(wrapper, "w") as f:
            f.write(saved)


def test_a_late_release_between_prepare_and_allocation_keeps_the_room(
        lab, guests):
    """The race of the test above, forced: s1's release re-derives the
    PMD COS after s3's prepare made room and before libvirt allocates.
    It used to put s1's ways back ("Not enough room")."""
    hooklab.eventually(lambda: _l3(lab, PMD) == 0x600)
    _sharers_and_a_plain_one(lab, guests)
    with _hooks_delayed(lab, release_of="s1", prepare_of="s3"):
        lab.libvirt.destroy("s1")
        _start(lab, guests, "s3", 2, True)
        hooklab.eventually(
            lambda: _l3(lab, hooklab.group_of(lab, "s3")) == 0x180
            and _l3(lab, PMD) == 0x7f0)
    assert hooklab.hook_errors(lab) == []
