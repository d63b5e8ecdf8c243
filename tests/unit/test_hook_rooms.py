"""The room a sharer's 'prepare' makes holds until it starts (issue 38).

On the FUSE emulator (gold-6252: 11 ways on each of 2 cache ids, host
ways 0-1, PMD base 9-10).  s1 (ways 7-8) and s2 (4-6) share with the
PMDs, p1 (2-3) does not: the PMD COS is one run over 4-10.  s1 stops;
the PMD COS keeps covering its ways until a sharer takes them.  A new
sharer's 'prepare' takes them out of the PMD COS so that libvirt's
allocator (played here by the double of :mod:`tests.libvirt_model`)
finds them free.  libvirt runs 'release' in the background, so s1's can
run after that 'prepare': it used to re-derive the PMD COS from the
records, which do not know the new sharer yet, and put the ways back
("Not enough room").
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time

import pytest

from nova_rdt import naming
from nova_rdt.host import prep
from nova_rdt.host import rooms as rooms_mod
from nova_rdt.host.agent import Agent
from nova_rdt.host.records import Records
from nova_rdt.resctrl import cbm
from tests import libvirt_model
from tests.unit import test_hook_placement
from tests.unit.test_hook_placement import Host
from tests.unit.test_hook_placement import _event
from tests.unit.test_hook_placement import _meta

PMD = naming.pmd_group("nova-rdt-")
S3 = "5739af97-f801-4ee1-ace0-5bcd858b3407"
CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

# The placement tests' emulated host (gold-6252, 2 host ways, a 2-way
# PMD base), as pytest finds fixtures by their module-level names.
emulator = test_hook_placement.emulator
host = test_hook_placement.host


def _libvirt_allocates(host, ways):
    """What libvirt's allocator gives a domain of ``ways`` ways on both
    cache ids now (virResctrlAllocGetUnused + FindUnused); None where it
    says "Not enough room"."""
    with host.fs.locked():
        free = libvirt_model.free_masks(libvirt_model.read_state(host.fs),
                                        "L3")
    return {cid: cbm.best_fit(mask, ways) for cid, mask in free.items()}


def _sharers_and_s1_stopped(host, p1=True):
    """s1, s2 (and p1) running; s1's QEMU and group gone, its 'release'
    not run yet.  Returns s1's uuid."""
    s1 = host.start("s1", 2, chosen=0x00c, share=True)
    host.start("s2", 3, chosen=0x01c, share=True)
    if p1:
        host.start("p1", 2, chosen=0x00c)
    assert host.l3(PMD) == {0: 0x7f0, 1: 0x7f0}
    qemu = host.procs[0]
    qemu.kill()
    qemu.wait()
    os.rmdir(os.path.join(host.root, s1))
    return next(r.uuid for r in Records(host.settings.state_path).all()[0]
                if r.name == "s1")


def _room_files(host):
    try:
        return sorted(os.listdir(os.path.join(host.settings.state_path,
                                              "rooms")))
    except FileNotFoundError:
        return []


@pytest.mark.parametrize("decided", [None, 0x180])
def test_a_late_release_keeps_the_room_prepare_made(host, decided):
    s1 = _sharers_and_s1_stopped(host)
    Agent(host.settings).handle(_event("prepare", "s3", S3, 2, True,
                                       decided))
    assert host.l3(PMD) == {0: 0x600, 1: 0x600}
    # s1's release, late in the background: it re-derives the PMD COS.
    Agent(host.settings).handle(_event("release", "s1", s1, 2, True))
    assert host.l3(PMD) == {0: 0x600, 1: 0x600}
    assert _libvirt_allocates(host, 2) == {0: 0x180, 1: 0x180}
    assert _room_files(host) == [f"{S3}.json"]

    s3 = host.start("s3", 2, chosen=0x180, share=True, decided=decided,
                    uuid=S3)
    assert host.l3(s3) == {0: 0x180, 1: 0x180}
    # Its record holds the ways now: the room is gone, the PMD COS
    # covers its sharers again.
    assert _room_files(host) == []
    assert host.l3(PMD) == {0: 0x7f0, 1: 0x7f0}


def test_reconcile_and_pmd_sync_keep_the_room(host):
    _sharers_and_s1_stopped(host)
    agent = Agent(host.settings)
    agent.handle(_event("prepare", "s3", S3, 2, True))
    report = agent.reconcile()
    assert host.l3(PMD) == {0: 0x600, 1: 0x600}
    assert not [d for d in report.degraded if d.startswith("pmd_")]
    agent.sync_pmd(cores=set())
    assert _libvirt_allocates(host, 2) == {0: 0x180, 1: 0x180}
    assert _room_files(host) == [f"{S3}.json"]


def test_a_failed_start_gives_the_ways_back(host):
    _sharers_and_s1_stopped(host)
    agent = Agent(host.settings)
    agent.handle(_event("prepare", "s3", S3, 2, True))
    agent.handle(_event("release", "s3", S3, 2, True))
    assert _room_files(host) == []
    assert host.l3(PMD) == {0: 0x7f0, 1: 0x7f0}


def _invoked(agent, start):
    # Another hook process's invocation, started at ``start``.
    agent._lifecycle.invocation = rooms_mod.Invocation(os.getpid() + 1,
                                                       start)
    return agent


def test_a_restarts_room_outlives_the_release_of_its_last_run(host):
    """s1 stops and starts again at once: the release of its first run,
    invoked before the new 'prepare', runs after it.  It must drop the
    record of the run that ended, not the new start's room."""
    s1 = _sharers_and_s1_stopped(host)
    now = rooms_mod.now_ticks()[0]
    old_release = _invoked(Agent(host.settings), now - 50)
    _invoked(Agent(host.settings), now - 10).handle(
        _event("prepare", "s1", s1, 2, True))
    assert host.l3(PMD) == {0: 0x600, 1: 0x600}
    old_release.handle(_event("release", "s1", s1, 2, True))
    assert host.l3(PMD) == {0: 0x600, 1: 0x600}
    assert _libvirt_allocates(host, 2) == {0: 0x180, 1: 0x180}
    assert _room_files(host) == [f"{s1}.json"]
    # The new run's own release (its start failed) ends the room.
    _invoked(Agent(host.settings), now).handle(
        _event("release", "s1", s1, 2, True))
    assert _room_files(host) == []
    assert host.l3(PMD) == {0: 0x7f0, 1: 0x7f0}


def test_a_late_release_keeps_the_record_of_the_run_after_it(host):
    """s1 stops and starts again, all the way to 'started', before the
    release of its first run has done its work.  That release must leave
    the new run's record, or the PMD COS stops covering its ways."""
    s1 = _sharers_and_s1_stopped(host)
    now = rooms_mod.now_ticks()[0]
    old_release = _invoked(Agent(host.settings), now - 50)
    host.start("s1", 2, chosen=0x180, share=True, uuid=s1)
    covered = host.l3(PMD)
    assert covered == {0: 0x7f0, 1: 0x7f0}
    old_release.handle(_event("release", "s1", s1, 2, True))
    assert host.l3(PMD) == covered
    records = Records(host.settings.state_path).all()[0]
    assert [r.uuid for r in records if r.name == "s1"] == [s1]
    # The new run's own release, once its QEMU is gone, ends the record.
    qemu = host.procs[-1]
    qemu.kill()
    qemu.wait()
    Agent(host.settings).handle(_event("release", "s1", s1, 2, True))
    assert [r for r in Records(host.settings.state_path).all()[0]
            if r.name == "s1"] == []


def _xml(name, uuid, ways, share):
    m = _meta(ways, share)
    return (f"<domain type='kvm'><name>{name}</name><uuid>{uuid}</uuid>"
            f"<metadata>{m.to_xml()}</metadata></domain>").encode()


def _hook(settings_path, name, op):
    env = dict(os.environ, PYTHONPATH=CHECKOUT)
    return subprocess.Popen(
        [sys.executable, "-m", "nova_rdt.hook.main", "--settings",
         settings_path, "--", name, op, "begin", "-"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=env)


def test_hook_processes_in_the_racing_order(host, tmp_path):
    """The real hook, one process per operation as libvirt runs it: s1's
    release is invoked (its process exists, waiting for the XML), then
    s1 is started again and its 'prepare' runs to the end; the release
    runs last."""
    s1 = _sharers_and_s1_stopped(host)
    settings = str(tmp_path / "hook.json")
    host.settings.dump(settings)
    xml = _xml("s1", s1, 2, True)
    release = _hook(settings, "s1", "release")
    time.sleep(0.1)                     # ten clock ticks later
    prepare = _hook(settings, "s1", "prepare")
    out, err = prepare.communicate(xml, timeout=60)
    assert prepare.returncode == 0, err
    assert host.l3(PMD) == {0: 0x600, 1: 0x600}
    out, err = release.communicate(xml, timeout=60)
    assert release.returncode == 0, err
    assert host.l3(PMD) == {0: 0x600, 1: 0x600}
    assert _libvirt_allocates(host, 2) == {0: 0x180, 1: 0x180}
    assert b"its room stays" in err
    assert _room_files(host) == [f"{s1}.json"]


def test_another_hand_started_sharer_is_placed_off_the_room(host):
    """Two sharers started by hand at once: the second one's placement
    counts the first one's room as taken."""
    _sharers_and_s1_stopped(host, p1=False)
    agent = Agent(host.settings)
    agent.handle(_event("prepare", "s3", S3, 2, True))
    room = rooms_mod.Rooms(host.settings.state_path).read(f"{S3}.json")
    assert room.ways().domains("L3") == {0: 0x180, 1: 0x180}
    other = "0d3f1a9e-5b1c-4f57-9e0c-6a8d9f1b2c3d"
    agent.handle(_event("prepare", "s4", other, 1, True))
    taken = rooms_mod.Rooms(host.settings.state_path).read(
        f"{other}.json").ways().domains("L3")
    assert all(mask & 0x180 == 0 for mask in taken.values())
    # Both rooms are kept out of the PMD COS.
    assert all(mask & (0x180 | taken[cid]) == 0
               for cid, mask in host.l3(PMD).items())


def test_a_class_group_made_meanwhile_stays_off_the_room(emulator,
                                                          tmp_path):
    """A class member starts between a sharer's 'prepare' and libvirt's
    allocation: its class group is made off the room."""
    h = Host(str(tmp_path), emulator)
    h.settings = dataclasses.replace(h.settings, classes=("be:l3_ways=2",))
    h.clear()
    prep.prepare(h.fs, 2, 2)
    try:
        h.start("p1", 3, chosen=0x01c)                 # ways 2-4
        Agent(h.settings).handle(_event("prepare", "s3", S3, 2, True,
                                        0x060))
        m = _meta(0, False)
        m.cache = []
        m.rdt_class = "be"
        h.launch("c1", m, None)
        be = h.l3("nova-rdt-class-be")
        assert be == {0: 0x180, 1: 0x180}
        assert _libvirt_allocates(h, 2) == {0: 0x060, 1: 0x060}
    finally:
        h.clear()


# -- stale rooms -------------------------------------------------------------

def _room(host, uuid, name, *, age_s=0.0, boot=None, mask=0x180):
    now, hz = rooms_mod.now_ticks()
    made = max(now - int(age_s * hz), 0)
    room = rooms_mod.Room(
        uuid=uuid, name=name, schemata=f"L3:0={mask:x};1={mask:x}\n",
        boot_id=boot or rooms_mod.boot_id(), pid=os.getpid(),
        pid_start=made, made=made)
    rooms_mod.Rooms(host.settings.state_path).put(room)
    return room


UUIDS = [f"11111111-1111-4111-8111-{i:012d}" for i in range(8)]


def test_reconcile_sweeps_stale_rooms_and_honours_the_rest(host):
    _sharers_and_s1_stopped(host)
    limit = rooms_mod.STALE_AFTER_TIMEOUTS * host.settings.hook_timeout
    _room(host, UUIDS[0], "young")
    _room(host, UUIDS[1], "old", age_s=limit + 5)
    _room(host, UUIDS[2], "lastboot",
          boot="00000000-0000-4000-8000-000000000000")
    # Old, but a QEMU of its start runs: a long start (hugepages).
    _room(host, UUIDS[3], "slow", age_s=limit + 5)
    qemu = subprocess.Popen(["sleep", "60"])
    host.procs.append(qemu)
    with open(os.path.join(host.run_dir, "slow.pid"), "w") as f:
        f.write(str(qemu.pid))
    # Old, and the process its pid file names predates it.
    _room(host, UUIDS[4], "early", age_s=limit + 5)
    with open(os.path.join(host.run_dir, "early.pid"), "w") as f:
        f.write("1")
    # The domain runs with its record ('started' cut short before it
    # removed the room).
    s2 = next(r.uuid for r in Records(host.settings.state_path).all()[0]
              if r.name == "s2")
    _room(host, s2, "s2")

    report = Agent(host.settings).reconcile()
    assert _room_files(host) == sorted(
        f"{u}.json" for u in (UUIDS[0], UUIDS[3]))
    assert len([p for p in report.swept if "/rooms/" in p]) == 4
    # The young room (ways 7-8) is kept out of the PMD COS.
    assert host.l3(PMD) == {0: 0x600, 1: 0x600}


def test_a_stale_room_is_not_honoured_before_it_is_swept(host):
    _sharers_and_s1_stopped(host)
    limit = rooms_mod.STALE_AFTER_TIMEOUTS * host.settings.hook_timeout
    _room(host, UUIDS[1], "old", age_s=limit + 5)
    Agent(host.settings).sync_pmd(cores=set())
    assert host.l3(PMD) == {0: 0x7f0, 1: 0x7f0}


# -- hostile rooms -----------------------------------------------------------

def _plant(rooms_dir, name, data):
    with open(os.path.join(rooms_dir, name), "wb") as f:
        f.write(data)


def _good(uuid, **change):
    now = rooms_mod.now_ticks()[0]
    data = {"uuid": uuid, "name": "x", "schemata": "L3:0=180;1=180\n",
            "boot_id": rooms_mod.boot_id(), "pid": os.getpid(),
            "pid_start": now, "made": now}
    data.update(change)
    return json.dumps(data).encode()


def test_hostile_room_files_are_never_honoured_and_are_swept(host,
                                                             tmp_path):
    _sharers_and_s1_stopped(host)
    d = os.path.join(host.settings.state_path, "rooms")
    os.makedirs(d)
    target = tmp_path / "precious"
    precious = _good(UUIDS[0])
    target.write_bytes(precious)
    os.symlink(target, os.path.join(d, f"{UUIDS[0]}.json"))
    os.mkfifo(os.path.join(d, f"{UUIDS[1]}.json"))
    _plant(d, f"{UUIDS[2]}.json", b"{" * 100000)
    _plant(d, f"{UUIDS[3]}.json", _good(UUIDS[3]) + b" " * 9000)
    _plant(d, f"{UUIDS[4]}.json", _good(UUIDS[5]))        # not its name
    _plant(d, f"{UUIDS[5]}.json", _good(UUIDS[5], schemata="MB:0=10\n"))
    _plant(d, f"{UUIDS[6]}.json", _good(UUIDS[6], extra=1))
    _plant(d, f"{UUIDS[7]}.json", _good(UUIDS[7], pid_start=True))
    os.mkdir(os.path.join(d, f"{UUIDS[0][:-1]}9.json"))
    _plant(d, "notes.txt", b"operator's")
    _plant(d, f"{UUIDS[3]}.json.{2 ** 22 - 3}.tmp", b"torn")
    rooms, bad = rooms_mod.Rooms(host.settings.state_path).all()
    assert rooms == []
    assert len(bad) == 10

    agent = Agent(host.settings)
    # Hostile rooms are not honoured: the PMD COS is what records say.
    agent.sync_pmd(cores=set())
    assert host.l3(PMD) == {0: 0x7f0, 1: 0x7f0}
    report = agent.reconcile()
    assert host.l3(PMD) == {0: 0x7f0, 1: 0x7f0}
    # What nova-rdt could have written there is removed (never through
    # the link); the rest is left to the operator.
    assert sorted(os.listdir(d)) == [f"{UUIDS[0][:-1]}9.json", "notes.txt"]
    assert target.read_bytes() == precious
    assert len([p for p in report.swept if "/rooms/" in p]) == 9


def test_a_room_that_cannot_be_written_does_not_stop_the_start(host,
                                                                caplog):
    _sharers_and_s1_stopped(host)
    os.makedirs(host.settings.state_path, exist_ok=True)
    # Not a directory: every write under it fails.
    _plant(host.settings.state_path, "rooms", b"")
    Agent(host.settings).handle(_event("prepare", "s3", S3, 2, True))
    assert host.l3(PMD) == {0: 0x600, 1: 0x600}
    assert "room of s3" in caplog.text and "not written" in caplog.text
    # Nor does it stop a release or a reconcile.
    Agent(host.settings).handle(_event("release", "s3", S3, 2, True))
    assert host.l3(PMD) == {0: 0x7f0, 1: 0x7f0}
    Agent(host.settings).reconcile()


def test_the_records_failpoints_are_the_records_not_the_rooms(host):
    """The faults lab arms records.write for the record a start writes:
    the room 'prepare' writes earlier does not pass it."""
    from nova_rdt import failpoints

    _sharers_and_s1_stopped(host)
    with failpoints.armed({"records.write": "trace",
                           "records.rename": "trace"}):
        Agent(host.settings).handle(_event("prepare", "s3", S3, 2, True))
        assert failpoints.counts() == {"records.write": 0,
                                       "records.rename": 0}
        host.start("s3", 2, chosen=0x180, share=True, uuid=S3)
        assert failpoints.counts() == {"records.write": 1,
                                       "records.rename": 1}
    assert _room_files(host) == []
