"""Each recovery rule of nova-rdt reconcile, on the emulated resctrl.

See doc/source/recovery.rst.  A host is the FUSE emulator plus real
processes for the QEMUs (tests/unit/test_recovery_host.py); the agent,
the records, adoption and the CLI are the real code.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import subprocess
import sys
import textwrap

import pytest

from nova_rdt import failpoints
from nova_rdt.cmd import main as cli
from nova_rdt.emulator import mount as emu_mount
from nova_rdt.host import records as records_mod
from nova_rdt.host import recovery
from tests.unit import test_recovery_host as th

pytestmark = pytest.mark.fuse


def _need_fuse():
    reason = emu_mount.fuse_unavailable_reason()
    if reason:
        pytest.skip(f"FUSE emulator unavailable: {reason}")


@pytest.fixture(scope="module")
def shared_emulator(tmp_path_factory):
    _need_fuse()
    emu = th.new_emulator(str(tmp_path_factory.mktemp("emu")))
    yield emu
    emu.stop()
    th.fusermount_uz(emu.mountpoint)


@pytest.fixture
def host(shared_emulator, tmp_path):
    h = th.Host(str(tmp_path), shared_emulator)
    th.reset(h)
    failpoints.disarm()
    yield h
    failpoints.disarm()
    h.kill_all()


@pytest.fixture
def own_host(tmp_path):
    """A host whose emulator the test may kill or restart."""
    _need_fuse()
    emu = th.new_emulator(str(tmp_path / "emu"))
    h = th.Host(str(tmp_path), emu)
    th.reset(h)
    yield h
    failpoints.disarm()
    h.kill_all()
    h.emulator.stop()
    th.fusermount_uz(h.emulator.mountpoint)


def _restart_emulator(h: th.Host) -> None:
    """The emulator dies and comes back empty, as after a remount."""
    h.emulator.proc.kill()
    h.emulator.proc.wait()
    th.fusermount_uz(h.root)
    # Their owners make the foreign groups again.
    h.emulator = th.new_emulator(h.emulator.state_dir, h.root)


def _degraded_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if "nova-rdt degraded" in r.getMessage()]


def _cli_reconcile(h: th.Host, capsys) -> tuple[int, dict]:
    path = os.path.join(h.workdir, "hook.json")
    with open(path, "w") as f:
        json.dump({k: list(v) if isinstance(v, tuple) else v
                   for k, v in dataclasses.asdict(h.settings).items()
                   if v is not None}, f)
    capsys.readouterr()
    rc = cli.main(["reconcile", "--settings", path, "--json"])
    out = capsys.readouterr().out
    return rc, json.loads(out)


# -- a dead VM: its group, its record, its class, the PMD ---------------

def test_dead_vms_leave_nothing_and_foreign_groups_stay(host):
    host.start("a", share=True)
    host.start("b", rdt_class=th.CLASS)
    host.start("c")
    for name in ("a", "b"):
        host.crash(name)               # no release hook
    report = host.reconcile()
    assert len(report.removed_groups) == 2     # a's group, the class
    assert len(report.dropped_records) == 2
    assert report.degraded == []
    assert host.leaks() == []
    assert host.schemata("nova-rdt-pmd")["L3"] == 0x600


def test_reconcile_twice_changes_nothing_the_second_time(host):
    host.start("a", share=True)
    host.crash("a")
    host.reconcile()
    before = host.snapshot()
    report = host.reconcile()
    assert (report.removed_groups, report.dropped_records,
            report.restored_groups) == ([], [], [])
    assert host.snapshot() == before


# -- resctrl lost: every group gone, running VMs go on --------------------

def test_resctrl_lost_recreates_the_groups_of_running_vms(own_host):
    h = own_host
    a = h.start("a", share=True)
    h.start("b", rdt_class=th.CLASS)
    c = h.start("c")
    h.start("d")
    before = {n: h.schemata(n)["L3"] for n in (a.group, c.group)}
    pmd_before = h.schemata("nova-rdt-pmd")["L3"]
    h.crash("d")
    _restart_emulator(h)
    assert h.groups() == {"/", *th.FOREIGN}
    report = h.reconcile()
    assert sorted(report.restored_groups) == sorted([a.group, c.group])
    assert report.restored_host
    assert report.degraded == []
    assert {n: h.schemata(n)["L3"] for n in (a.group, c.group)} == before
    assert h.schemata("/")["L3"] == 0x3          # the host's ways again
    assert h.schemata("nova-rdt-pmd")["L3"] == pmd_before
    assert h.leaks() == []


def test_a_running_vm_without_recorded_schemata_is_reported(own_host,
                                                             caplog):
    h = own_host
    a = h.start("a")
    recs = h.records()
    old = recs.all()[0][0]
    recs.put(dataclasses.replace(old, schemata=None, tasks=None))
    _restart_emulator(h)
    with caplog.at_level(logging.ERROR):
        report = h.reconcile()
    assert [d.split(":")[0] for d in report.degraded] == [
        "group_not_restored"]
    assert a.group not in h.groups()
    lines = _degraded_lines(caplog)
    assert len(lines) == 1 and "restart the instance" in lines[0]


# -- the emulator killed, resctrl unmounted ---------------------------------

def test_emulator_killed_is_one_line_and_exit_3(own_host, caplog, capsys):
    h = own_host
    h.start("a", share=True)
    h.crash("a")
    h.emulator.proc.kill()
    h.emulator.proc.wait()
    with caplog.at_level(logging.ERROR):
        report = h.reconcile()
    assert [d.split(":")[0] for d in report.degraded] == [
        "resctrl_unavailable"]
    assert len(_degraded_lines(caplog)) == 1
    # Nothing dropped: the records re-create groups once resctrl is back.
    assert report.dropped_records == []
    assert len(h.records().all()[0]) == 1
    rc, out = _cli_reconcile(h, capsys)
    assert rc == 1          # not repaired: a runtime failure
    assert out["degraded"][0].startswith("resctrl_unavailable: ")
    # And once it is back, everything converges.
    th.fusermount_uz(h.root)
    h.emulator = th.new_emulator(h.emulator.state_dir, h.root)
    rc, out = _cli_reconcile(h, capsys)
    assert rc == 0 and out["degraded"] == []
    assert h.leaks() == []


def test_resctrl_not_mounted(tmp_path, caplog):
    _need_fuse()
    empty = tmp_path / "resctrl"
    empty.mkdir()
    (empty / "COS1").mkdir()

    class NoEmulator:
        mountpoint = str(empty)
        sysfs_cpu = str(tmp_path / "cpu")
    h = th.Host(str(tmp_path), NoEmulator())
    with caplog.at_level(logging.ERROR):
        report = h.agent().reconcile()
    assert [d.split(":")[0] for d in report.degraded] == [
        "resctrl_unavailable"]
    assert len(_degraded_lines(caplog)) == 1
    assert os.listdir(empty) == ["COS1"]


# -- the state path full or read-only ---------------------------------------

@contextlib.contextmanager
def _tmpfs(path: str, size: str):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    os.makedirs(path, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}",
                        "tmpfs", path], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", path], capture_output=True)


def _fill(path: str) -> None:
    with open(os.path.join(path, "filler"), "wb", buffering=0) as f:
        for size in (65536, 4096, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError:
                pass


def test_state_path_full(host, caplog):
    with _tmpfs(host.state_path, "256k"):
        host.start("a", share=True)        # a record to keep
        old = host.records().all()
        _fill(host.state_path)
        with caplog.at_level(logging.ERROR):
            b = host.start("b", share=True)
        lines = _degraded_lines(caplog)
        assert len(lines) == 1 and "(state_full)" in lines[0]
        assert "not written" in lines[0]
        # The isolation went on: the PMD COS covers b all the same.
        assert host.schemata("nova-rdt-pmd")["L3"] & b.mask == b.mask
        # The old record is intact, and no temporary file is left.
        assert host.records().all() == old
        assert not [n for n in os.listdir(host.records().dir)
                    if n.endswith(".tmp")]
        report = host.reconcile()
        assert any(d.startswith("state_full:") for d in report.degraded)
        assert recovery.probe_state_path(host.state_path).reason == \
            "state_full"
        # Room again: reconcile adopts b from libvirt's status file.
        for n in os.listdir(host.state_path):
            if n != "domains":
                os.unlink(os.path.join(host.state_path, n))
        report = host.reconcile()
        assert report.adopted == [b.uuid]
        assert report.degraded == []
        assert host.leaks() == []


def test_state_path_read_only(host, caplog, capsys):
    with _tmpfs(host.state_path, "1m"):
        a = host.start("a", share=True)
        host.crash("a")
        subprocess.run(["mount", "-o", "remount,ro", host.state_path],
                       check=True)
        with caplog.at_level(logging.ERROR):
            report = host.reconcile()
        # The group is removed; the record cannot be, and is kept.
        assert report.removed_groups == [a.group]
        assert report.dropped_records == []
        assert [d.split(":")[0] for d in report.degraded] == [
            "state_readonly"]
        assert len(_degraded_lines(caplog)) == 1
        rc, _out = _cli_reconcile(host, capsys)
        assert rc == 1          # not repaired: a runtime failure
        subprocess.run(["mount", "-o", "remount,rw", host.state_path],
                       check=True)
        report = host.reconcile()
        assert report.dropped_records == [a.uuid]
        assert report.degraded == []
        assert host.leaks() == []


# -- failpoints: writes cut short -------------------------------------------

def test_a_write_cut_before_its_rename_leaves_the_old_record(host):
    a = host.start("a")
    rec = host.records().all()[0][0]
    with failpoints.armed({"records.write": "raise"}):
        with pytest.raises(failpoints.FailpointError):
            host.records().put(dataclasses.replace(rec, pmd_share=True))
    assert host.records().all()[0] == [rec]
    assert host.leaks() == []
    assert a.name in host.snapshot()["records"]


def test_a_process_killed_mid_write_leaves_a_temporary_that_is_swept(host):
    rec = records_mod.Record(
        uuid="6f1a3c86-5b1e-4c55-9a3a-1b2c3d4e5f60", name="gone", pid=1,
        pid_start=None, pmd_share=False, rdt_class=None, group=None)
    code = textwrap.dedent(f"""
        from nova_rdt.host import records
        r = records.Record(**{dataclasses.asdict(rec)!r})
        records.Records({host.state_path!r}).put(r)
    """)
    env = dict(os.environ, **{failpoints.ENV: "records.write=exit"})
    p = subprocess.run([sys.executable, "-c", code], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == failpoints.EXIT_CODE, p.stderr
    tmp = [n for n in os.listdir(host.records().dir) if n.endswith(".tmp")]
    assert len(tmp) == 1
    assert host.records().all() == ([], [])       # never published
    report = host.reconcile()
    assert [os.path.basename(p) for p in report.swept] == tmp
    assert host.leaks() == []


def test_class_group_made_but_never_given_its_ways(host):
    with failpoints.armed({"agent.class_update": "raise"}):
        with pytest.raises(failpoints.FailpointError):
            host.start("b", rdt_class=th.CLASS)
    g = "nova-rdt-class-" + th.CLASS
    assert host.schemata(g)["L3"] == 0x7ff      # the kernel's default
    host.reconcile()
    assert bin(host.schemata(g)["L3"]).count("1") == 1
    assert host.leaks() == []


@pytest.mark.parametrize("point", ["agent.between_schemata_and_record",
                                   "agent.after_record",
                                   "agent.pmd_update"])
def test_hook_cut_short_in_started_converges(host, point):
    host.start("a", share=True)
    with failpoints.armed({point: "raise"}):
        with pytest.raises(failpoints.FailpointError):
            host.start("b", share=True)
    report = host.reconcile()
    assert report.degraded == []
    if point == "agent.between_schemata_and_record":
        assert len(report.adopted) == 1
    assert host.leaks() == []


def test_hook_cut_short_in_release_converges(host):
    host.start("a", share=True)
    with failpoints.armed({"agent.release_before_record": "raise"}):
        with pytest.raises(failpoints.FailpointError):
            host.stop("a")
    host.reconcile()
    assert host.leaks() == []


@pytest.mark.parametrize("point", ["reconcile.remove",
                                   "reconcile.drop_record",
                                   "reconcile.restore_group"])
def test_reconcile_cut_short_then_run_again_converges(own_host, point):
    h = own_host
    for name in ("a", "b", "c"):
        h.start(name, share=name == "a")
    h.crash("b")
    h.crash("c")
    if point == "reconcile.restore_group":
        _restart_emulator(h)
    with failpoints.armed({point: "raise"}):
        with pytest.raises(failpoints.FailpointError):
            h.reconcile()
    report = h.reconcile()
    assert report.degraded == []
    assert h.leaks() == []


# -- libvirtd restarted ----------------------------------------------------

def test_libvirtd_restart_reconnect_rewrites_the_same_record(host):
    a = host.start("a", share=True)
    before = host.records().all()
    host.hook(a, "reconnect")           # what libvirtd does on restart
    assert host.records().all() == before
    assert host.reconcile().degraded == []
    assert host.leaks() == []


def test_libvirtd_restart_after_resctrl_lost_keeps_and_redoes_groups(
        own_host):
    h = own_host
    a = h.start("a", share=True)
    mask = h.schemata(a.group)["L3"]
    _restart_emulator(h)
    th.reset_layout(h)
    h.hook(a, "reconnect")      # libvirtd restarted before any reconcile
    assert h.schemata(a.group)["L3"] == mask
    rec = h.records().all()[0][0]
    assert rec.group == a.group and rec.schemata is not None
    assert h.reconcile().degraded == []
    assert h.leaks() == []


# -- what the exporter says ---------------------------------------------------

def test_exporter_degraded_metric(own_host):
    from prometheus_client import generate_latest
    from prometheus_client.registry import CollectorRegistry

    from nova_rdt.exporter.live import LiveView
    from nova_rdt.exporter.metrics import RdtCollector
    from nova_rdt.exporter.sample import Sampler
    from nova_rdt.resctrl.groups import Resctrl

    h = own_host
    h.start("a")

    def scrape() -> dict[str, float]:
        fs = Resctrl(h.root, sysfs_cpu=h.emulator.sysfs_cpu)
        reg = CollectorRegistry()
        reg.register(RdtCollector(LiveView(Sampler(fs, h.state_path))))
        out = {}
        for line in generate_latest(reg).decode().splitlines():
            if line.startswith("nova_rdt_degraded{"):
                reason = line.split('reason="')[1].split('"')[0]
                out[reason] = float(line.rsplit(" ", 1)[1])
        return out

    healthy = scrape()
    assert set(healthy) == set(recovery.OBSERVABLE)
    assert set(recovery.OBSERVABLE) <= set(recovery.REASONS)
    assert set(healthy.values()) == {0.0}
    _restart_emulator(h)
    assert scrape()["group_not_restored"] == 1.0
    h.reconcile()
    assert set(scrape().values()) == {0.0}
    h.emulator.proc.kill()
    h.emulator.proc.wait()
    seen = scrape()
    assert seen["resctrl_unavailable"] == 1.0
    assert sum(seen.values()) == 1.0


# -- records: the new fields are checked like the others -------------------

@pytest.mark.parametrize("field,why", [
    ({"schemata": "L3:0=3", "group": None}, "schemata"),
    ({"schemata": "bogus line"}, "schemata"),
    ({"schemata": "L3:0=" + "f" * 5000}, "schemata"),
    ({"tasks": [0]}, "tasks"),
    ({"tasks": ["1"]}, "tasks"),
    ({"tasks": list(range(1, 2000))}, "tasks"),
    ({"tasks": [1], "group": None, "schemata": None}, "tasks"),
])
def test_hostile_recovery_fields_are_refused(field, why):
    base = {"uuid": "6f1a3c86-5b1e-4c55-9a3a-1b2c3d4e5f60", "name": "vm",
            "pid": 5, "pid_start": None, "pmd_share": False,
            "rdt_class": None, "group": "qemu-1-vm-vcpus_0",
            "schemata": "L3:0=3;1=3\n", "tasks": [5]}
    records_mod.Record.from_dict(base)
    with pytest.raises(records_mod.RecordError, match=why):
        records_mod.Record.from_dict({**base, **field})


def test_state_path_probes(tmp_path):
    assert recovery.probe_state_path(str(tmp_path / "not" / "yet")) is None
    assert recovery.state_reason(OSError(28, "x")) == "state_full"
    assert recovery.state_reason(OSError(30, "x")) == "state_readonly"
    assert recovery.state_reason(OSError(13, "x")) == "state_unwritable"
    with pytest.raises(ValueError, match="unknown degraded reason"):
        recovery.Degraded("nope", "x")


# -- the scheduler sees a host whose resctrl went away ----------------------

def test_filter_refuses_rdt_on_a_degraded_host_then_passes_it_again(
        caplog):
    from nova import objects
    from nova.scheduler import host_manager

    from nova_rdt.allocation import hoststate
    from nova_rdt.scheduler import filter as rdt_filter
    from nova_rdt.virt import rdt_compute
    from tests.unit.test_planner import published
    from tests.unit.test_planner import state

    objects.register_all()
    rdt_filter._SUMMARIES.clear()
    hs = host_manager.HostState("degraded-host", "n", "cell")
    good = {**published(state()).to_stats(), hoststate.DEGRADED_STAT: ""}
    hs.stats = good
    want = objects.RequestSpec(flavor=objects.Flavor(
        flavorid="f", vcpus=4, extra_specs={"rdt:l3_cache_ways": "2"}),
        numa_topology=None)
    plain = objects.RequestSpec(flavor=objects.Flavor(
        flavorid="p", vcpus=4, extra_specs={}), numa_topology=None)
    f = rdt_filter.RDTFilter()
    assert f.host_passes(hs, want)
    # What the driver publishes while resctrl is gone (Nova's tracker
    # merges it over the last good stats).
    hs.stats = {**good, "rdt": "",
                hoststate.DEGRADED_STAT: "resctrl_unavailable"}
    with caplog.at_level(logging.DEBUG, logger="nova_rdt.scheduler.filter"):
        assert not f.host_passes(hs, want)
    assert f.host_passes(hs, plain)
    assert any("degraded: resctrl_unavailable" in r.getMessage()
               for r in caplog.records)
    hs.stats = good
    assert f.host_passes(hs, want)
    # The key the compute writes is the one the filter reads.
    assert rdt_filter.DEGRADED_STAT == rdt_compute.DEGRADED_STAT


def test_a_link_planted_at_the_temporary_name_is_never_written_through(
        tmp_path):
    # The writer runs as root and its temporary's name is predictable.
    victim = tmp_path / "victim"
    victim.write_text("keep")
    path = tmp_path / "state.json"
    os.symlink(victim, f"{path}.{os.getpid()}.tmp")
    records_mod.write_durably(str(path), b"{}")
    assert victim.read_text() == "keep"
    assert path.read_text() == "{}" and not path.is_symlink()
    assert sorted(os.listdir(tmp_path)) == ["state.json", "victim"]


def test_an_unreadable_record_of_a_running_vm_is_left_not_adopted(host):
    a = host.start("a", share=True)
    path = os.path.join(host.records().dir, f"{a.uuid}.json")
    with open(path, "wb") as f:
        f.write(b"{torn")
    report = host.reconcile()
    assert report.adopted == []
    assert any(d.startswith("records_unreadable:") for d in report.degraded)
    with open(path, "rb") as f:
        assert f.read() == b"{torn"        # the evidence stays
    # Once the operator removes it, the next reconcile adopts the VM.
    os.unlink(path)
    report = host.reconcile()
    assert report.adopted == [a.uuid]
    assert report.degraded == []
