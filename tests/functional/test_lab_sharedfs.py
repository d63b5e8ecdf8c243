"""The two-compute cloud's shared instances path (nova_rdt.lab.sharedfs):
a pass-through FUSE mount that libvirt takes for a cluster filesystem
(``fuse.glusterfs``), on which QEMU's disk files behave as on the
directory behind it."""

import os
import subprocess
import sys
import time

import pytest

from nova_rdt.emulator import mount as emulator_mount
from nova_rdt.lab import sharedfs


@pytest.fixture
def mounted(tmp_path):
    reason = emulator_mount.fuse_unavailable_reason()
    if reason:
        pytest.skip(reason)
    if os.geteuid() != 0:
        pytest.skip("mounting with allow_other needs root")
    backing = tmp_path / "backing"
    point = tmp_path / "mnt"
    backing.mkdir()
    point.mkdir()
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    proc = subprocess.Popen(
        [sys.executable, "-m", "nova_rdt.lab.sharedfs", str(backing),
         str(point)], env={**os.environ, "PYTHONPATH": root},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while not sharedfs.mounted(str(point)):
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "not mounted within 20 s"
        time.sleep(0.1)
    try:
        yield backing, point
    finally:
        subprocess.run(["umount", "-l", str(point)], capture_output=True)
        proc.wait(timeout=20)


def test_the_mount_is_a_shared_filesystem_to_libvirt(mounted):
    _backing, point = mounted
    with open("/proc/self/mounts") as f:
        line = next(ln for ln in f if ln.split()[1] == str(point))
    assert line.split()[2] == "fuse.glusterfs"


def test_files_and_directories_land_in_the_backing_directory(mounted):
    backing, point = mounted
    (point / "inst").mkdir()
    (point / "inst" / "disk").write_bytes(b"x" * 8192)
    os.rename(point / "inst" / "disk", point / "inst" / "disk.1")
    os.symlink("disk.1", point / "inst" / "link")
    assert (backing / "inst" / "disk.1").read_bytes() == b"x" * 8192
    assert os.readlink(backing / "inst" / "link") == "disk.1"
    assert sorted(os.listdir(point / "inst")) == ["disk.1", "link"]
    os.truncate(point / "inst" / "disk.1", 4096)
    assert os.path.getsize(backing / "inst" / "disk.1") == 4096
    os.unlink(point / "inst" / "link")
    os.unlink(point / "inst" / "disk.1")
    os.rmdir(point / "inst")
    assert os.listdir(backing) == []


def test_direct_io_opens_as_qemu_opens_a_cache_none_disk(mounted):
    _backing, point = mounted
    path = point / "disk"
    path.write_bytes(b"\0" * 4096)
    fd = os.open(path, os.O_RDWR | os.O_DIRECT)
    try:
        assert len(os.pread(fd, 4096, 0)) == 4096
    finally:
        os.close(fd)


def test_qemu_img_makes_and_reads_an_image_there(mounted):
    if not subprocess.run(["which", "qemu-img"],
                          capture_output=True).returncode == 0:
        pytest.skip("qemu-img is not installed")
    _backing, point = mounted
    disk = point / "disk.qcow2"
    subprocess.run(["qemu-img", "create", "-f", "qcow2", str(disk), "8M"],
                   check=True, capture_output=True)
    info = subprocess.run(["qemu-img", "info", str(disk)], check=True,
                          capture_output=True, text=True).stdout
    assert "file format: qcow2" in info


def test_a_path_that_leaves_the_backing_directory_is_refused(tmp_path):
    # The kernel resolves ".." before asking; the server maps every path
    # it is given under the backing directory all the same.
    mfusepy, passthrough = sharedfs._operations()
    ops = passthrough(str(tmp_path))
    assert ops._p("/a/b") == str(tmp_path / "a" / "b")
    with pytest.raises(mfusepy.FuseOSError):
        ops._p("/../outside")
