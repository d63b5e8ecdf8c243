"""A live migration between two real libvirtds, each with nova-rdt's hook:
the destination's group gets the decided masks before the guest runs.

libvirt runs the ``started`` hook in the incoming Prepare phase, with the
vCPUs paused until Finish (``qemuMigrationDstPrepare`` ->
``qemuProcessFinishStartup(..., VIR_DOMAIN_PAUSED_MIGRATION)``); that is
only worth something if the hook writes before it returns.  Measured
here before the shim waited for it: the write, done in the background,
landed 180-270 ms after libvirt's "Resumed Migrated" event, the guest
running meanwhile on libvirt's own choice of ways.  The domain carries
decided masks (way 10) that libvirt's allocator would not pick (it takes
the lowest free way, 2), so the two are told apart.
"""

from __future__ import annotations

import datetime
import os
import re
import subprocess
import threading
import time
import uuid as uuid_mod

import pytest

from nova_rdt.host import prep as hostprep
from nova_rdt.lab import diskless_domain_xml
from nova_rdt.virt import config as rdt_config
from tests.integration import hooklab
from tests.integration.conftest import finish_lab
from tests.integration.conftest import lab_skip_reason
from tests.integration.conftest import start_lab

DECIDED = 0x400           # way 10, where the allocator would give way 2
WAY_KIB = 3328            # gold-6252: 35.75 MiB in 11 ways
NAME = "mig-prepare"


@pytest.fixture(scope="module")
def two_labs(libvirt_cache):
    reason = lab_skip_reason(libvirt=True)
    if reason:
        pytest.skip(reason)
    labs = []
    try:
        for _ in range(2):
            lab = start_lab(profile="gold-6252", ovs=False,
                            libvirt_cache_dir=libvirt_cache,
                            hook={"reserved_host_ways": 2})
            labs.append(lab)
            lab.start()
            hostprep.prepare(hooklab.fs(lab), reserved_ways=2, pmd_ways=0)
        yield labs
    finally:
        for lab in labs:
            lab.libvirt.virsh("destroy", NAME, check=False)
            finish_lab(lab)


def _stamp(text: str, utc: bool) -> float:
    """``2026-11-28 08:32:21.059`` -> epoch seconds; virsh's event stamps
    are UTC, the hook's log is in local time (logging's default)."""
    when = datetime.datetime.strptime(text[:23], "%Y-%m-%d %H:%M:%S.%f")
    if utc:
        when = when.replace(tzinfo=datetime.UTC)
    return when.timestamp()


def _groups(lab) -> dict[str, dict[int, int]]:
    """libvirt's groups of the domain -> their L3 masks."""
    out = {}
    for g in os.listdir(lab.resctrl_root):
        if g.startswith("qemu-") and f"-{NAME}-" in g:
            try:
                out[g] = dict(hooklab.schemata(lab, g).domains("L3"))
            except OSError:
                continue        # removed while read
    return out


def test_the_decided_masks_are_in_place_before_the_guest_resumes(two_labs):
    src, dst = two_labs
    meta = rdt_config.LibvirtConfigGuestMetaNovaRdt()
    meta.vcpus, meta.cache = {0}, [(0, "both", 1)]
    meta.masks = {(0, "both"): DECIDED}
    tune = (f"<cachetune vcpus='0'><cache id='0' level='3' type='both' "
            f"size='{WAY_KIB}' unit='KiB'/></cachetune>")
    xml = diskless_domain_xml(NAME, vcpus=1, domain_type="kvm",
                              cputune=tune, metadata=meta.to_xml())
    src.libvirt.define(xml.replace(
        "<name>", f"<uuid>{uuid_mod.uuid4()}</uuid>\n  <name>", 1))
    src.libvirt.start_domain(NAME, paused=False)
    hooklab.eventually(lambda: list(_groups(src).values()) == [
        {0: DECIDED, 1: 0x3}])

    events = subprocess.Popen(
        ["virsh", "-c", dst.libvirt.uri, "event", "--all", "--loop",
         "--timestamp"], stdout=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(
        target=lambda: lines.extend(iter(events.stdout.readline, "")))
    reader.start()
    # virsh listens once it reports an event: one of a domain defined
    # and undefined for the purpose.
    probe = "evt-probe"
    dst.libvirt.define(diskless_domain_xml(probe))
    dst.libvirt.undefine(probe)
    hooklab.eventually(lambda: any(probe in ln for ln in lines))
    seen: list[tuple[float, dict]] = []
    done = threading.Event()

    def watch():
        # What the destination's group holds, each change in turn.
        while not done.is_set():
            for masks in _groups(dst).values():
                if not seen or seen[-1][1] != masks:
                    seen.append((time.time(), masks))
            time.sleep(0.001)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        src.libvirt.virsh("migrate", "--live", NAME, dst.libvirt.uri,
                          "tcp://127.0.0.1", timeout=120)
        hooklab.eventually(lambda: _peek(dst).startswith("running"))
        hooklab.eventually(
            lambda: any("Resumed Migrated" in ln for ln in lines))
    finally:
        done.set()
        watcher.join()
        events.terminate()
        events.wait()
        reader.join()

    resumed = [_stamp(ln, utc=True) for ln in lines
               if "Resumed Migrated" in ln]
    assert resumed, lines
    with open(os.path.join(dst.log_dir, "hook.log")) as f:
        writes = [_stamp(ln, utc=False) for ln in f
                  if re.search(rf"{NAME}: decided masks in qemu-", ln)]
    assert writes, "the destination's hook wrote no decided masks"
    # The hook's write (ms stamps from the same clock) came first.
    assert writes[0] < resumed[0], (writes, resumed, seen)
    # The group ends at the decided mask (libvirt's own pick, way 2, is
    # seen first when the poll catches it).
    assert seen and seen[-1][1] == {0: DECIDED, 1: 0x3}, seen
    dst_groups = _groups(dst)
    assert len(dst_groups) == 1
    group = next(iter(dst_groups))
    tids = set(dst.libvirt.vcpu_tids(NAME).values())
    with open(os.path.join(dst.resctrl_root, group, "tasks")) as f:
        assert {int(t) for t in f.read().split()} == tids
    # Nothing of it is left on the source.
    assert _groups(src) == {}
    assert NAME not in src.libvirt.domains(running_only=True)


def _peek(lab) -> str:
    return lab.libvirt.virsh("domstate", "--reason", NAME, check=False)
