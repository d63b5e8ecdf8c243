"""The library against the emulator mounted through FUSE: real syscalls,
real errno, real flock, real processes and PID namespaces.

Mounting costs a process start, so these run on two releases, the oldest
and newest the emulator models (the kernel-model tests run on all)."""

import errno
import json
import os
import shutil
import subprocess
import sys

import pytest

from nova_rdt.emulator import mount
from nova_rdt.emulator import versions
from nova_rdt.resctrl import errors
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.resctrl.schemata import Schemata

pytestmark = pytest.mark.fuse
CLI = [sys.executable, "-m", "nova_rdt.cmd.main"]
MOUNTED_KERNELS = (versions.SUPPORTED[0], versions.SUPPORTED[-1])


@pytest.fixture(params=MOUNTED_KERNELS)
def kernel_release(request):
    return request.param


@pytest.fixture
def emulator(request, kernel_release):
    """A mounted emulator of one release; parametrize indirectly with a
    profile name.  (Shadows the functional conftest's, which mounts the
    default release.)"""
    reason = mount.fuse_unavailable_reason()
    if reason:
        pytest.skip(f"FUSE emulator unavailable: {reason}")
    emu = mount.Emulator(getattr(request, "param", "gold-6252"),
                         kernel=kernel_release)
    emu.start()
    yield emu
    emu.stop()


def lib(emu, **kw):
    return Resctrl(emu.mountpoint, sysfs_cpu=emu.sysfs_cpu, **kw)


def test_library_view_matches_the_gold_6252_profile(emulator):
    caps = lib(emulator).capabilities()
    l3 = caps.cache["L3"]
    assert l3.cbm_len == 11 and l3.num_closids == 16
    assert sorted(l3.domains) == [0, 1]
    assert all(d.size == 36608 * 1024 for d in l3.domains.values())
    assert l3.way_size(0) == 3328 * 1024
    mb = caps.bandwidth["MB"]
    assert (mb.num_closids, mb.bandwidth_gran, mb.min_bandwidth,
            mb.units) == (8, 10, 10, "percent")
    assert caps.clos_count == 8
    assert caps.monitoring["L3_MON"].num_rmids == 176


def test_host_show_json_reports_the_profile(emulator):
    out = subprocess.run(CLI + ["host", "show", "--json"], check=True,
                         capture_output=True, text=True,
                         env={**os.environ, **emulator.env()}).stdout
    doc = json.loads(out)
    l3 = doc["capabilities"]["cache"]["L3"]
    assert sorted(l3["domains"]) == ["0", "1"] and l3["ways"] == 11
    assert l3["num_closids"] == 16
    mb = doc["capabilities"]["bandwidth"]["MB"]
    assert mb["num_closids"] == 8 and mb["bandwidth_gran"] == 10
    assert doc["way_map"]["L3"]["0"] == [["/"]] * 11


@pytest.mark.parametrize("emulator, groups", [("gold-6252", 7),
                                              ("e7-8890-v4", 15)],
                         indirect=["emulator"])
def test_out_of_closids(emulator, groups):
    # The kernel's limit is the minimum num_closids over all resources,
    # less the root's CLOSID 0: min(16 L3, 8 MB) - 1 = 7 on the Gold 6252
    # with MBA, 16 - 1 = 15 on the E7-8890 v4 without it.
    fs = lib(emulator)
    for i in range(groups):
        fs.create_group(f"nova-rdt-g{i}")
    with pytest.raises(errors.OutOfClosids) as e:
        fs.create_group("nova-rdt-one-more")
    assert e.value.errno == errno.ENOSPC
    assert "Out of CLOSIDs" in str(e.value)
    assert not os.path.exists(os.path.join(emulator.mountpoint,
                                           "nova-rdt-one-more"))


def test_the_mount_serves_the_release_asked_for(emulator, kernel_release):
    # sparse_masks appeared in 6.7; values lost their padding in 6.15.
    info = os.listdir(os.path.join(emulator.mountpoint, "info", "L3"))
    new = versions.parse(kernel_release).at_least("6.15")
    assert ("sparse_masks" in info) == new
    fs = lib(emulator)
    g = fs.create_group("nova-rdt-fmt")
    kept = fs.write_schemata(g, Schemata({"L3": {0: 0x3}, "MB": {0: 20}}))
    assert kept.get("L3", 0) == 0x3 and kept.get("MB", 0) == 20
    with open(os.path.join(g.path, "schemata")) as f:
        text = f.read()
    assert ("L3:0=3;" in text) == new and ("L3:0=003;" in text) != new


def test_bad_kernel_version_is_a_clear_error():
    with pytest.raises(ValueError, match="kernel version '4.19' is older"):
        mount.Emulator("gold-6252", kernel="4.19")
    with pytest.raises(ValueError, match="not of the form X.Y"):
        mount.Emulator("gold-6252", kernel="latest")


def test_non_consecutive_mask_quotes_the_kernel(emulator):
    fs = lib(emulator)
    g = fs.create_group("nova-rdt-vm")
    with pytest.raises(errors.WriteRejected) as e:
        fs.write_schemata(g, Schemata({"L3": {0: 0x5}}))
    assert e.value.errno == errno.EINVAL
    assert e.value.status == "The mask 5 has non-consecutive 1-bits"
    assert "The mask 5 has non-consecutive 1-bits" in str(e.value)
    kept = fs.write_schemata(g, Schemata({"L3": {0: 0x6}, "MB": {1: 15}}))
    assert kept.get("L3", 0) == 0x6 and kept.get("L3", 1) == 0x7FF
    assert kept.get("MB", 1) == 20                    # rounded up


def test_write_without_newline_is_refused_by_the_kernel(emulator):
    fd = os.open(os.path.join(emulator.mountpoint, "schemata"), os.O_WRONLY)
    try:
        with pytest.raises(OSError) as e:
            os.write(fd, b"L3:0=3")
        assert e.value.errno == errno.EINVAL
    finally:
        os.close(fd)


def test_tasks_move_a_real_thread_and_come_back_on_rmdir(emulator):
    fs = lib(emulator)
    g = fs.create_group("nova-rdt-tasks")
    proc = subprocess.Popen(["sleep", "30"])
    try:
        assert fs.add_tasks(g, [proc.pid]) == [proc.pid]
        assert g.tasks() == [proc.pid]
        assert proc.pid not in fs.root_group().tasks()
        with pytest.raises(errors.WriteRejected) as e:
            fs.add_tasks(g, [2 ** 22 + 7])
        assert e.value.errno == errno.ESRCH
        assert fs.add_tasks(g, [2 ** 22 + 7], ignore_missing=True) == []
        fs.set_cpus(g, {2, 3})
        assert g.cpus() == {2, 3}
        fs.delete_group(g)
        assert proc.pid in fs.root_group().tasks()
        assert {2, 3} <= fs.root_group().cpus()
    finally:
        proc.kill()
        proc.wait()


def test_monitoring_counters_move_with_a_task(emulator):
    import time

    from nova_rdt.resctrl import monitoring
    fs = lib(emulator)
    g = fs.create_group("nova-rdt-mon")
    # A busy task: the emulator's bandwidth follows real CPU time, so an
    # idle one (sleep) reads flat, as on hardware.
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        fs.add_tasks(g, [proc.pid])
        # The first readings only see the task: its CPU time counts from
        # then on.
        monitoring.read_mon_data(g.path)
        time.sleep(0.3)
        first = monitoring.read_mon_data(g.path)
        time.sleep(0.3)
        second = monitoring.read_mon_data(g.path)
        assert [r.domain for r in second] == [0, 1]
        assert second[0].mbm_total_bytes > first[0].mbm_total_bytes
        assert second[0].llc_occupancy > 0
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("name", ["../../x", "$(reboot)", "a/b", "info",
                                  "mon_groups", "", "x" * 200])
def test_hostile_names_are_refused(emulator, name):
    fs = lib(emulator)
    with pytest.raises((errors.InvalidGroupName, errors.NotOwned)):
        fs.create_group(name)


def test_groups_we_do_not_own_are_never_touched(emulator):
    fs = lib(emulator)
    os.mkdir(os.path.join(emulator.mountpoint, "qemu-1-vm-vcpus_0"))
    os.mkdir(os.path.join(emulator.mountpoint, "pqos-cos1"))
    owners = {g.display_name: g.owner for g in fs.groups()}
    assert owners["qemu-1-vm-vcpus_0"] == "libvirt"
    assert owners["pqos-cos1"] == "foreign"
    for name in ("qemu-1-vm-vcpus_0", "pqos-cos1"):
        g = fs.group(name)
        with pytest.raises(errors.NotOwned):
            fs.delete_group(g)
        with pytest.raises(errors.NotOwned):
            fs.write_schemata(g, Schemata({"L3": {0: 1}}))
        with pytest.raises(errors.NotOwned):
            fs.add_tasks(g, [os.getpid()])
    with pytest.raises(errors.NotOwned):
        fs.write_schemata(fs.root_group(), Schemata({"L3": {0: 3}}))
    # Reserving host ways is the one sanctioned change to the root.
    fs.write_schemata(fs.root_group(), Schemata({"L3": {0: 3, 1: 3}}),
                      allow_root=True)
    assert fs.root_group().schemata().get("L3", 1) == 3


def test_monitor_groups(emulator):
    fs = lib(emulator)
    g = fs.create_group("nova-rdt-ctrl")
    m = fs.create_mon_group("nova-rdt-m", parent=g.name)
    assert [x.display_name for x in g.mon_groups()] == \
        ["nova-rdt-ctrl/mon_groups/nova-rdt-m"]
    assert m.kind == "mon" and os.path.isdir(os.path.join(m.path, "mon_data"))
    fs.delete_group(m)
    assert g.mon_groups() == []


def test_flock_is_the_one_libvirt_takes(emulator):
    holder = lib(emulator)
    waiter = lib(emulator, lock_timeout=0.2)
    with holder.locked():
        with pytest.raises(errors.LockTimeout):
            waiter.create_group("nova-rdt-blocked")
    waiter.create_group("nova-rdt-after")


def test_stop_leaves_nothing_mounted():
    reason = mount.fuse_unavailable_reason()
    if reason:
        pytest.skip(reason)
    emu = mount.Emulator("amd-epyc").start()
    mp, proc = emu.mountpoint, emu.proc
    emu.stop()
    emu.stop()
    assert not os.path.ismount(mp) and proc.poll() is not None


def test_namespace_presents_sys_fs_resctrl_and_topology():
    reason = mount.fuse_unavailable_reason()
    if reason:
        pytest.skip(reason)
    def sys_fs_resctrl_mounts():
        # Only that mount point: other emulators come and go meanwhile.
        with open("/proc/self/mountinfo") as f:
            return sum(1 for line in f
                       if line.split()[4] == "/sys/fs/resctrl")

    before = sys_fs_resctrl_mounts()
    script = ("cat /sys/fs/resctrl/info/L3/cbm_mask "
              "/sys/devices/system/cpu/cpu0/cache/index3/size "
              "/sys/devices/system/cpu/cpu0/cache/index3/id; "
              "ls /sys/fs/cgroup >/dev/null && echo cgroup-ok; "
              + " ".join(CLI) + " host show --json")
    out = subprocess.run(CLI + ["emulate", "--profile", "e7-8890-v4",
                                "--namespace", "--", "sh", "-c", script],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:4] == ["fffff", "61440K", "0", "cgroup-ok"]
    doc = json.loads("\n".join(lines[4:]))
    l3 = doc["capabilities"]["cache"]["L3"]
    assert l3["ways"] == 20
    assert l3["domains"]["0"]["size"] == 61440 * 1024
    # Nothing leaked into the host's namespace.
    assert sys_fs_resctrl_mounts() == before
    assert not os.path.exists("/sys/fs/resctrl/info/L3/cbm_mask") or \
        open("/sys/fs/resctrl/info/L3/cbm_mask").read() != "fffff\n"


def _unshare_reason():
    if os.geteuid() != 0:
        return "needs root for unshare --pid"
    if not shutil.which("unshare"):
        return "unshare (util-linux) is not installed"
    return None


def _in_child_pid_namespace(script: str) -> subprocess.Popen:
    """sh as PID 1 of a new PID namespace, running ``script``."""
    return subprocess.Popen(
        ["unshare", "--pid", "--fork", "--", "sh", "-c", script],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _nspid(pid: int) -> list[int]:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("NSpid:"):
                return [int(x) for x in line.split()[1:]]
    return []


def test_child_pid_namespace_writes_its_own_pid_1(emulator, kernel_release):
    """find_task_by_vpid(): "1" written from a child PID namespace is that
    namespace's init, never the host's PID 1; task_pid_vnr(): the child
    reads its own numbers back."""
    reason = _unshare_reason()
    if reason:
        pytest.skip(reason)
    tasks = os.path.join(emulator.mountpoint, "nova-rdt-ns", "tasks")
    os.mkdir(os.path.dirname(tasks))
    proc = _in_child_pid_namespace(
        f"echo 1 > {tasks} || exit 3; cat {tasks}; echo done; "
        "exec sleep 30")
    try:
        seen = [proc.stdout.readline().strip() for _ in range(3)]
        assert seen[-1] == "done", (seen, proc.stderr.read())
        # Inside: sh is 1, and the cat it forked after the move inherited
        # the group (its pid there is 2).
        assert seen[:2] == ["1", "2"]
        with open(tasks) as f:
            host_view = [int(t) for t in f.read().split()]
        assert 1 not in host_view
        assert len(host_view) == 1, host_view
        (sh,) = host_view
        assert _nspid(sh)[-1] == 1 and _nspid(sh)[0] == sh
        with open(os.path.join(emulator.mountpoint, "tasks")) as f:
            assert "1" in f.read().split()        # the host's init stays
    finally:
        proc.kill()
        proc.wait()


def test_child_pid_namespace_cannot_name_host_tasks(emulator, kernel_release):
    """A pid that does not exist in the writer's namespace is ESRCH with
    the kernel's message, even when the host has such a process."""
    reason = _unshare_reason()
    if reason:
        pytest.skip(reason)
    group = os.path.join(emulator.mountpoint, "nova-rdt-ns2")
    os.mkdir(group)
    host_pid = os.getpid()
    # coreutils echo: dash's builtin reports every write error as EIO.
    proc = _in_child_pid_namespace(
        f"env echo {host_pid} > {group}/tasks; echo rc=$?")
    out, err = proc.communicate(timeout=30)
    assert "rc=1" in out and "No such process" in err, (out, err)
    with open(os.path.join(emulator.mountpoint, "info",
                           "last_cmd_status")) as f:
        status = f.read()
    want = f"No task {host_pid}\n"
    if versions.parse(kernel_release).task_lists:
        want += f"Error while processing task {host_pid}\n"
    assert status == want
    with open(os.path.join(group, "tasks")) as f:
        assert f.read() == ""


def test_forked_child_follows_its_parent(emulator):
    """A child forked after its parent moved is listed in the group."""
    fs = lib(emulator)
    g = fs.create_group("nova-rdt-fork")
    parent = subprocess.Popen(
        ["sh", "-c", "read x; sleep 30 & echo $!; wait"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    child = None
    try:
        fs.add_tasks(g, [parent.pid])
        parent.stdin.write("go\n")
        parent.stdin.flush()
        child = int(parent.stdout.readline())
        assert sorted(g.tasks()) == sorted([parent.pid, child])
        assert child not in fs.root_group().tasks()
    finally:
        if child:
            try:
                os.kill(child, 9)
            except ProcessLookupError:
                pass
        parent.kill()
        parent.wait()


def test_rename_moves_a_monitor_group(emulator, kernel_release):
    """rdtgroup_rename() since 6.5; EPERM from kernfs before."""
    mp = emulator.mountpoint
    for d in ("nova-rdt-a", "nova-rdt-b", "nova-rdt-a/mon_groups/m"):
        os.mkdir(os.path.join(mp, d))
    src = os.path.join(mp, "nova-rdt-a/mon_groups/m")
    dst = os.path.join(mp, "nova-rdt-b/mon_groups/m")
    if versions.parse(kernel_release).mon_group_rename:
        os.rename(src, dst)
        assert os.path.isdir(dst) and not os.path.exists(src)
        with pytest.raises(OSError) as e:
            os.rename(os.path.join(mp, "nova-rdt-a"),
                      os.path.join(mp, "nova-rdt-c"))
        assert e.value.errno == errno.EPERM
        with open(os.path.join(mp, "info", "last_cmd_status")) as f:
            assert f.read() == "Source must be a MON group\n"
    else:
        with pytest.raises(OSError) as e:
            os.rename(src, dst)
        assert e.value.errno == errno.EPERM


def test_write_over_a_page_is_e2big(emulator):
    fd = os.open(os.path.join(emulator.mountpoint, "cpus_list"), os.O_WRONLY)
    try:
        with pytest.raises(OSError) as e:
            os.write(fd, b"1 " * 2049)
        assert e.value.errno == errno.E2BIG
    finally:
        os.close(fd)
