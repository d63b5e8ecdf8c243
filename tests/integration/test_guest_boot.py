"""The lab's real Linux guest (issue 19): the image built from Debian
packages boots here, under KVM or, where KVM cannot run a stock kernel
(this machine's PVM flavour), TCG; its forward role carries frames
between its two NICs with testpmd in io mode (the ONP seed's VM0), or
through a kernel bridge when asked to or when testpmd cannot run, and
its noisy role runs memtester (the seed's VM1) or the stressor.

The boots run plain QEMU with two tap devices in a private network
namespace, driven from the host with raw sockets; vhost-user ports on
OVS-DPDK and Nova-built domains are the isolation scenario's part.
The first tests are the pure parts (initramfs archive, module order,
ELF dependencies, the accel decision, frame tagging) and need nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
import uuid
import xml.etree.ElementTree as ET

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import pytest

from nova_rdt.lab.guest import boot
from nova_rdt.lab.guest import cpio
from nova_rdt.lab.guest import domain
from nova_rdt.lab.guest import elfdeps
from nova_rdt.lab.guest import frames
from nova_rdt.lab.guest import image as guest_image
from nova_rdt.lab.guest import kmod
from nova_rdt.lab.guest import userland

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BUILD = os.path.join(TOP, "tools", "build-guest-image.sh")


# -- pure parts --------------------------------------------------------

names = st.text(alphabet="abcdefghij_/.-0123456789", min_size=1,
                max_size=20).filter(
    lambda n: n.strip("/") and n.strip("/") != cpio.TRAILER)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(names.map(lambda n: n.strip("/")),
                       st.binary(max_size=300), max_size=8))
def test_cpio_round_trip(files):
    entries = [cpio.Entry.file(n, d) for n, d in files.items()]
    blob = cpio.archive(entries)
    assert len(blob) % 4 == 0
    assert cpio.parse(blob) == entries


def test_cpio_members_as_the_kernel_reads_them():
    blob = cpio.archive([cpio.Entry.directory("dev"),
                         cpio.Entry.chardev("dev/console", 5, 1),
                         cpio.Entry.symlink("bin/sh", "busybox")])
    # The header's 13 fields: c_rdevmajor/minor (10th/11th) carry 5:1.
    second = blob.index(b"070701", 6)
    fields = [int(blob[second + 6 + 8 * i:second + 14 + 8 * i], 16)
              for i in range(13)]
    assert stat.S_ISCHR(fields[1]) and fields[9:11] == [5, 1]
    assert fields[6] == 0            # a device has no data
    back = cpio.parse(blob)
    assert back[2].data == b"busybox" and stat.S_ISLNK(back[2].mode)
    assert blob.endswith(b"TRAILER!!!\0" + b"\0" * (-(110 + 11) % 4))


@pytest.mark.parametrize("bad", ["", "/", "TRAILER!!!"])
def test_cpio_rejects_bad_names(bad):
    with pytest.raises(ValueError, match="cpio member name"):
        cpio.archive([cpio.Entry.file(bad, b"")])


def test_cpio_rejects_duplicates():
    with pytest.raises(ValueError, match="duplicate"):
        cpio.archive([cpio.Entry.file("a", b""), cpio.Entry.file("/a", b"")])


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_load_order_puts_dependencies_first(data):
    n = data.draw(st.integers(1, 10))
    mods = [f"m{i}" for i in range(n)]
    # Edges only to lower-numbered modules: a DAG, as modules are.
    deps = {m: data.draw(st.lists(st.sampled_from(mods[:i]), unique=True)
                         if i else st.just([]))
            for i, m in enumerate(mods)}
    builtin = set(data.draw(st.lists(st.sampled_from(mods), unique=True)))
    wanted = data.draw(st.lists(st.sampled_from(mods), min_size=1))
    order = kmod.load_order(wanted, deps, builtin)
    assert len(order) == len(set(order))
    assert not set(order) & builtin
    for m in wanted:
        assert m in builtin or m in order
    for m in order:
        for d in deps[m]:
            assert d in builtin or order.index(d) < order.index(m)


def test_load_order_names_the_missing_module_and_its_user():
    with pytest.raises(kmod.ModuleError, match="'llc'.*needed by stp"):
        kmod.load_order(["bridge"], {"bridge": ["stp"], "stp": ["llc"]},
                        set())
    with pytest.raises(kmod.ModuleError, match="cycle: a -> b -> a"):
        kmod.load_order(["a"], {"a": ["b"], "b": ["a"]}, set())
    # "-" and "_" name the same module, as in the kernel.
    assert kmod.load_order(["net-failover"], {"net_failover": []},
                           set()) == ["net_failover"]


def test_module_names():
    assert kmod.module_name("/x/bridge.ko.xz") == "bridge"
    assert kmod.module_name("virtio-pci.ko.zst") == "virtio_pci"
    assert kmod.module_name("llc.ko") == "llc"


def test_classify_probe():
    ok = boot.classify_probe(True, None, "nova-rdt-guest: init", "", 20)
    assert ok.accel == "kvm" and ok.domain_type == "kvm"
    hang = boot.classify_probe(
        False, None, "Booting from ROM...\r\nProbing EDD (edd=off to "
        "disable)... ok\r\n\x1bc\x1b[?7l\x1b[2J", "", 20)
    assert hang.accel == "tcg" and hang.domain_type == "qemu"
    assert "within 20 s" in hang.reason and "PVM" in hang.reason
    assert "stopped at 'Probing EDD (edd=off to disable)... ok'" \
        in hang.reason
    silent = boot.classify_probe(False, None, "", "", 5)
    assert silent.accel == "tcg" and "no console output" in silent.reason
    died = boot.classify_probe(False, 134, "", "kvm.c: Assertion failed\n",
                               20)
    assert died.accel == "tcg" and "status 134" in died.reason
    assert "Assertion failed" in died.reason


def test_cmdline_and_argv_reject_unknown_roles_and_accels():
    with pytest.raises(ValueError, match="role must be one of"):
        boot.cmdline("router")
    with pytest.raises(ValueError, match="accel must be one of"):
        boot.domain_type("hvf")
    assert "nova_rdt.role=noisy" in boot.cmdline("noisy")


def test_forwarder_of():
    assert boot.forwarder_of(
        "nova-rdt-guest: forwarding eth0<->eth1 (kernel bridge)") == "kernel"
    assert boot.forwarder_of(
        "nova-rdt-guest: forwarding eth0<->eth1 (testpmd)") == "testpmd"
    with pytest.raises(boot.GuestError):
        boot.forwarder_of("nova-rdt-guest: noisy running")


def test_noisy_of_and_guest_args():
    assert boot.noisy_of("nova-rdt-guest: noisy running (memtester 64 MiB, "
                         "pid 57)") == "memtester"
    assert boot.noisy_of("nova-rdt-guest: noisy running (stressor 8 MiB, "
                         "pid 3)") == "stressor"
    with pytest.raises(boot.GuestError):
        boot.noisy_of("nova-rdt-guest: forwarding eth0<->eth1 (testpmd)")
    assert boot.guest_args() == ""
    assert boot.guest_args("kernel", "stressor", 32) == (
        "nova_rdt.forwarder=kernel nova_rdt.noisy=stressor "
        "nova_rdt.stress_mib=32")
    for bad in (dict(forwarder="dpdk"), dict(noisy="stress-ng"),
                dict(noisy_mib=0)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            boot.guest_args(**bad)


# Debian's shared library package names (policy 8.1) and the exceptions
# the guest's userland meets.
@pytest.mark.parametrize("soname,package", [
    ("libnuma.so.1", "libnuma1"),
    ("librte_eal.so.23", "librte-eal23"),
    ("librte_common_mlx5.so.23", "librte-common-mlx5-23"),
    ("libnl-route-3.so.200", "libnl-route-3-200"),
    ("libpcap.so.0.8", "libpcap0.8"),
    ("liblz4.so.1", "liblz4-1"),
    ("libdbus-1.so.3", "libdbus-1-3"),
    ("libm.so.6", "libc6"),
    ("libz.so.1", "zlib1g"),
    ("libmlx5.so.1", "ibverbs-providers"),
])
def test_debian_package_of_a_soname(soname, package):
    assert elfdeps.debian_package(soname) == package


def test_debian_package_rejects_unversioned_names():
    with pytest.raises(elfdeps.ElfError, match="libfoo.so"):
        elfdeps.debian_package("libfoo.so")


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_closure_reaches_exactly_what_is_needed(data):
    n = data.draw(st.integers(1, 12))
    libs = [f"lib{i}.so.1" for i in range(n)]
    needed = {lib: data.draw(st.lists(st.sampled_from(libs + ["libx.so.9"]),
                                      unique=True, max_size=4))
              for lib in libs}
    # Some libraries are not unpacked yet: closure must report them.
    absent = set(data.draw(st.lists(st.sampled_from(libs), unique=True)))
    known = {k: v for k, v in needed.items() if k not in absent}
    roots = data.draw(st.lists(st.sampled_from(sorted(known) or ["lib0"]),
                               min_size=1, unique=True))
    found, missing = elfdeps.closure(roots, known)
    # The reference: a plain graph search.
    reach, todo = set(), list(roots)
    while todo:
        for d in known.get(todo.pop(), []):
            if d not in reach and d not in roots:
                reach.add(d)
                if d in known:
                    todo.append(d)
    assert set(found) == {r for r in reach if r in known}
    assert set(missing) == {r for r in reach if r not in known}
    assert len(found) == len(set(found)) and len(missing) == len(set(missing))
    assert not set(found) & set(roots)


def test_elf_reading_agrees_with_readelf():
    if shutil.which("readelf") is None:
        pytest.skip("readelf not found (binutils)")
    path = os.path.realpath(sys.executable)
    with open(path, "rb") as f:
        blob = f.read()
    out = subprocess.run(["readelf", "-dlW", path], capture_output=True,
                         text=True, check=True).stdout
    want = [line.split("[", 1)[1].rstrip("]") for line in out.splitlines()
            if "(NEEDED)" in line]
    assert elfdeps.dynamic(blob)["needed"] == want
    interp = [line.split(":", 1)[1].strip().rstrip("]")
              for line in out.splitlines() if "interpreter:" in line]
    assert elfdeps.interpreter(blob) == interp[0]
    with pytest.raises(elfdeps.ElfError, match="not an ELF"):
        elfdeps.dynamic(b"#!/bin/sh\n")


def test_symlinks_resolve_inside_the_unpacked_tree(tmp_path):
    lib = tmp_path / "lib" / "x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "libfoo.so.1.2").write_bytes(b"x")
    (lib / "libfoo.so.1").symlink_to("libfoo.so.1.2")
    (tmp_path / "lib64").mkdir()
    # Absolute, as in libc6's /lib64/ld-linux-x86-64.so.2: it must mean
    # the tree's file, never the host's.
    (tmp_path / "lib64" / "ld.so.2").symlink_to(
        "/lib/x86_64-linux-gnu/libfoo.so.1")
    want = str(lib / "libfoo.so.1.2")
    assert userland.resolve_in(str(tmp_path), "lib64/ld.so.2") == want
    assert userland.index(str(tmp_path))["libfoo.so.1"] == want
    (tmp_path / "lib64" / "loop").symlink_to("loop")
    with pytest.raises(userland.UserlandError, match="too many symlinks"):
        userland.resolve_in(str(tmp_path), "lib64/loop")


def test_initramfs_holds_parents_before_children():
    user = userland.Userland(
        files={"bin/dpdk-testpmd": b"t",
               "lib/x86_64-linux-gnu/libc.so.6": b"c"},
        symlinks={"lib64/ld-linux-x86-64.so.2":
                  "../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
                  "lib/dpdk-pmds/librte_net_virtio.so.23":
                  "../x86_64-linux-gnu/librte_net_virtio.so.23"},
        plugins=("/lib/dpdk-pmds/librte_net_virtio.so.23",),
        programs=("testpmd",))
    entries = guest_image.initramfs_entries(b"bb", b"st", b"init", [], user)
    names = [e.name for e in entries]
    assert len(names) == len(set(names))
    for i, name in enumerate(names):
        parent = os.path.dirname(name)
        assert not parent or parent in names[:i], name
    by_name = {e.name: e for e in entries}
    assert by_name["etc/dpdk-plugins"].data == (
        b"/lib/dpdk-pmds/librte_net_virtio.so.23\n")
    assert stat.S_ISLNK(by_name["lib64/ld-linux-x86-64.so.2"].mode)
    assert by_name["bin/dpdk-testpmd"].mode & 0o111


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1),
       st.integers(64, 1518))
def test_frames_carry_their_tag(tag, seq, size):
    f = frames.frame(tag, seq, size)
    assert len(f) == size - 4
    assert frames.parse(f, tag) == seq
    assert frames.parse(f, tag ^ 1) is None
    assert frames.parse(f[:12] + b"\x08\x00" + f[14:], tag) is None


def test_image_load_names_the_missing_file(tmp_path):
    with pytest.raises(guest_image.ImageError,
                       match="manifest.json missing.*build-guest-image"):
        guest_image.load(str(tmp_path))
    (tmp_path / "manifest.json").write_text('{"kernel": "vmlinuz"}')
    with pytest.raises(guest_image.ImageError, match="lacks key"):
        guest_image.load(str(tmp_path))


# -- real boots ----------------------------------------------------------

def _boot_skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "guest boots need root (tap devices, network namespaces)"
    for tool in (boot.QEMU, "ip", "gcc", "apt-get", "dpkg-deb"):
        if shutil.which(tool) is None:
            return f"{tool} not found"
    return None


needs_boot = pytest.mark.skipif(_boot_skip_reason() is not None,
                                reason=str(_boot_skip_reason()))


@pytest.fixture(scope="module")
def img():
    """Builds the image (or finds it current: the script is idempotent)
    in the default place, or $NOVA_RDT_GUEST_DIR."""
    r = subprocess.run([BUILD], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, PYTHON=sys.executable))
    if r.returncode != 0:
        if "apt-get download" in r.stderr:
            pytest.skip("cannot fetch the guest's Debian packages: "
                        + r.stderr.strip()[-300:])
        pytest.fail(f"tools/build-guest-image.sh failed: {r.stderr}")
    return guest_image.load()


@pytest.fixture(scope="module")
def accel(img):
    return boot.detect_accel(img)


@pytest.fixture
def netns():
    name = "nrg" + uuid.uuid4().hex[:8]
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def _taps(netns):
    return (netns + "a", netns + "b")


def _up(netns, taps):
    def ns(*argv):
        subprocess.run(["ip", "netns", "exec", netns, *argv], check=True,
                       capture_output=True)
    # No IPv6 autoconf chatter from the host side either.
    ns("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
    for tap in taps:
        ns("ip", "link", "set", tap, "up")


def _send(netns, src, dst, count=200, size=64, warmup=10.0, wait=3.0):
    r = subprocess.run(
        ["ip", "netns", "exec", netns, sys.executable, "-m",
         "nova_rdt.lab.guest.frames", "--send", src, "--recv", dst,
         "--count", str(count), "--size", str(size), "--wait", str(wait),
         "--warmup", str(warmup)],
        capture_output=True, text=True, timeout=30, cwd=TOP)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _ready_timeout(accel):
    # TCG boots this kernel in ~8 s on an idle core; allow for a loaded
    # 2-core machine.
    return 30.0 if accel.accel == "kvm" else 60.0


# (kernel command line, vCPU model, forwarder expected, console line
# expected before the ready line).  The vCPU model None is boot's
# choice (max under TCG, host under KVM), which has the SSE4.2 DPDK's
# x86 build needs; QEMU's old default qemu64 lacks it, so testpmd dies
# of SIGILL there and the default (auto) falls back to the bridge.
FORWARD_CASES = {
    "testpmd": (boot.guest_args("testpmd"), None, "testpmd", None),
    "kernel": (boot.guest_args("kernel"), None, "kernel", None),
    "auto-fallback": ("", "qemu64", "kernel",
                      "nova-rdt-guest: testpmd not used: testpmd exited "
                      "with status 132 (SIGILL"),
}


@needs_boot
@pytest.mark.parametrize("case", sorted(FORWARD_CASES))
def test_forwarding_guest_carries_frames_both_ways(img, accel, netns,
                                                   tmp_path, case):
    assert accel.accel in boot.ACCELS, accel
    extra, cpu, want, before = FORWARD_CASES[case]
    taps = _taps(netns)
    # 2 vCPUs, as the isolation scenario's forwarding flavor, and room
    # for testpmd's hugepages.
    with boot.QemuGuest(img, accel.accel, "forward", str(tmp_path),
                        taps=taps, netns=netns, name="fwd", vcpus=2,
                        memory_mib=512, extra_cmdline=extra, cpu=cpu) as g:
        line = g.wait_ready(_ready_timeout(accel) * 2)
        print(f"accel={accel.accel} ({accel.reason}); {line}")
        assert boot.forwarder_of(line) == want, g.serial()[-2000:]
        assert img.kernel_version in g.serial()
        if before:
            assert before in g.serial(), g.serial()[-2000:]
        _up(netns, taps)
        a_to_b = _send(netns, taps[0], taps[1])
        b_to_a = _send(netns, taps[1], taps[0], size=1024)
        assert a_to_b["warmed_up"], a_to_b
        assert a_to_b["received"] == a_to_b["sent"] == 200, a_to_b
        assert b_to_a["received"] == b_to_a["sent"] == 200, b_to_a
    assert g.popen is None
    # The taps went with QEMU.
    links = subprocess.run(["ip", "netns", "exec", netns, "ip", "-o",
                            "link"], capture_output=True, text=True).stdout
    assert taps[0] not in links and taps[1] not in links


@needs_boot
def test_forwarder_testpmd_fails_instead_of_falling_back(img, accel, netns,
                                                         tmp_path):
    # nova_rdt.forwarder=testpmd is for runs that must not measure the
    # bridge by mistake: on a vCPU without SSE4.2 the guest stops at an
    # error line naming the cause, which wait_ready raises at once.
    with boot.QemuGuest(img, accel.accel, "forward", str(tmp_path),
                        taps=_taps(netns), netns=netns, name="strict",
                        vcpus=2, memory_mib=512, cpu="qemu64",
                        extra_cmdline=boot.guest_args("testpmd")) as g:
        with pytest.raises(boot.GuestError,
                           match="error: testpmd: testpmd exited with "
                           "status 132 \\(SIGILL"):
            g.wait_ready(_ready_timeout(accel) * 2)
        assert "(kernel bridge)" not in g.serial()


@needs_boot
def test_noisy_guest_burns_cpu_and_forwards_nothing(img, accel, netns,
                                                    tmp_path):
    taps = _taps(netns)
    with boot.QemuGuest(img, accel.accel, "noisy", str(tmp_path),
                        taps=taps, netns=netns, name="noisy") as g:
        line = g.wait_ready(_ready_timeout(accel))
        assert line.startswith("nova-rdt-guest: noisy running"), line
        # memtester is the default where the image has it (the seed's
        # VM1); the stressor runs in the libvirt test below.
        assert "memtester" in img.noisy
        assert boot.noisy_of(line) == "memtester", line
        t0, c0 = time.monotonic(), boot.cpu_seconds(g.pid)
        time.sleep(2)
        busy = (boot.cpu_seconds(g.pid) - c0) / (time.monotonic() - t0)
        print(f"noisy guest ({accel.accel}): {busy:.2f} CPU s per s")
        # An idle guest costs a few % of a core; memtester's vCPU
        # runs flat out (the machine may be shared, hence not ~1.0).
        assert busy > 0.4, busy
        # Without the bridge nothing crosses: the forwarding test above
        # measures the guest, not a shortcut on the host.
        _up(netns, taps)
        assert _send(netns, taps[0], taps[1], count=20, warmup=0,
                     wait=1.5)["received"] == 0


@needs_boot
def test_a_guest_that_cannot_boot_fails_fast_with_its_console(img, accel,
                                                              tmp_path):
    # An empty initramfs: the kernel finds no /init and panics; the wait
    # ends on the panic line, long before its timeout, and QEMU is gone.
    empty = tmp_path / "empty.gz"
    empty.write_bytes(b"")
    broken = guest_image.GuestImage(
        img.directory, img.kernel, str(empty), img.kernel_version,
        img.modules, img.forwarders)
    g = boot.QemuGuest(broken, accel.accel, "forward", str(tmp_path),
                       name="broken")
    t0 = time.monotonic()
    with g, pytest.raises(boot.GuestError, match="Kernel panic"):
        g.wait_ready(120)
    assert time.monotonic() - t0 < 60
    assert g.popen is None


def test_domain_xml_boots_the_image_directly():
    img = guest_image.GuestImage("/g", "/g/vmlinuz", "/g/initrd.gz", "6.1",
                                 (), ("kernel",))
    root = ET.fromstring(domain.domain_xml("g<1>", img, "noisy", "tcg",
                                           "/tmp/s.log"))
    assert root.get("type") == "qemu"
    assert root.findtext("name") == "g<1>"
    assert root.findtext("os/kernel") == "/g/vmlinuz"
    assert root.findtext("os/initrd") == "/g/initrd.gz"
    assert "nova_rdt.role=noisy" in root.findtext("os/cmdline")
    assert "console=ttyS0" in root.findtext("os/cmdline")
    assert root.find("devices/serial/source").get("path") == "/tmp/s.log"
    # A vCPU model with SSE4.2 (testpmd), not libvirt's qemu64 default.
    assert root.find("cpu").get("mode") == "maximum"
    assert root.findtext("vcpu") == "1"
    kvm = ET.fromstring(domain.domain_xml("g", img, "forward", "kvm", "/s",
                                          vcpus=2))
    assert kvm.get("type") == "kvm"
    assert kvm.find("cpu").get("mode") == "host-passthrough"
    assert kvm.findtext("vcpu") == "2"


@pytest.fixture(scope="module")
def lab(libvirt_cache):
    from tests.integration.conftest import finish_lab
    from tests.integration.conftest import lab_skip_reason
    from tests.integration.conftest import start_lab
    reason = lab_skip_reason(libvirt=True)
    if reason:
        pytest.skip(reason)
    lab = start_lab(ovs=False, libvirt_cache_dir=libvirt_cache)
    try:
        lab.start()
    except BaseException:
        finish_lab(lab)
        raise
    yield lab
    finish_lab(lab)


def _domstat_cpu_seconds(lab, name):
    out = lab.libvirt.virsh("domstats", "--cpu-total", name)
    for line in out.split():
        if line.startswith("cpu.time="):
            return int(line.split("=", 1)[1]) / 1e9
    raise AssertionError(f"no cpu.time in virsh domstats: {out}")


@needs_boot
def test_noisy_guest_under_libvirt(img, accel, lab, guests):
    # The same image through the lab's libvirtd, with the domain type
    # the accel decision gives (TCG is type='qemu'); the load is what
    # virsh domstats reports, as the exporter and the scenario will see.
    serial = os.path.join(lab.base, "noisy.serial.log")
    lab.libvirt.define(domain.domain_xml(
        "guest-noisy", img, "noisy", accel.accel, serial,
        extra_cmdline=boot.guest_args(noisy="stressor")))
    guests.append("guest-noisy")
    lab.libvirt.start_domain("guest-noisy", paused=False)
    deadline = time.monotonic() + _ready_timeout(accel)
    text = ""
    while "nova-rdt-guest: noisy running (stressor" not in text:
        assert time.monotonic() < deadline, f"console: {text[-500:]!r}"
        assert "Kernel panic" not in text, text[-500:]
        time.sleep(0.2)
        text = open(serial).read() if os.path.exists(serial) else ""
    root = ET.fromstring(lab.libvirt.dumpxml("guest-noisy"))
    assert root.get("type") == accel.domain_type
    t0, c0 = time.monotonic(), _domstat_cpu_seconds(lab, "guest-noisy")
    time.sleep(2)
    busy = ((_domstat_cpu_seconds(lab, "guest-noisy") - c0)
            / (time.monotonic() - t0))
    print(f"noisy guest under libvirt ({accel.domain_type}): "
          f"{busy:.2f} CPU s per s")
    assert busy > 0.4, busy


def test_qemu_argv_is_a_direct_boot_with_unique_macs():
    img = guest_image.GuestImage("/g", "/g/vmlinuz", "/g/initrd.gz", "6.1",
                                 (), ("kernel",))
    macs = set()
    for n in range(3):
        argv = boot.qemu_argv(img, "tcg", "forward", "/s", ("ta", "tb"),
                              guest_no=n)
        assert argv[argv.index("-accel") + 1] == "tcg"
        assert argv[argv.index("-kernel") + 1] == "/g/vmlinuz"
        assert argv[argv.index("-initrd") + 1] == "/g/initrd.gz"
        assert argv[argv.index("-serial") + 1] == "file:/s"
        assert "-no-reboot" in argv and "-nodefaults" in argv
        devices = [a for a in argv if a.startswith("virtio-net-pci")]
        assert len(devices) == 2
        macs |= {d.split("mac=")[1] for d in devices}
    assert len(macs) == 6
    with pytest.raises(ValueError):
        boot.qemu_argv(img, "hax", "forward", "/s")
    with pytest.raises(ValueError, match="vcpus"):
        boot.qemu_argv(img, "tcg", "forward", "/s", vcpus=0)


@pytest.mark.parametrize("accel,role,cpu,want", [
    ("tcg", "forward", None, "max"),       # SSE4.2 for testpmd
    ("tcg", "probe", None, "max"),
    ("kvm", "forward", None, "host"),
    ("kvm", "probe", None, None),          # -cpu host fails on PVM KVM
    ("tcg", "forward", "qemu64", "qemu64"),
])
def test_qemu_argv_vcpu_model(accel, role, cpu, want):
    img = guest_image.GuestImage("/g", "/g/vmlinuz", "/g/initrd.gz", "6.1",
                                 (), ("kernel",))
    argv = boot.qemu_argv(img, accel, role, "/s", cpu=cpu, vcpus=2)
    assert argv[argv.index("-smp") + 1] == "2"
    if want is None:
        assert "-cpu" not in argv
    else:
        assert argv[argv.index("-cpu") + 1] == want
