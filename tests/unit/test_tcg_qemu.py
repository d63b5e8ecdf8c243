"""The lab's QEMU for kvm domains where KVM cannot boot Linux: what it
changes in a guest's command line, and that it changes nothing else."""

import json
import os
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st
import pytest

from nova_rdt.lab import tcg_qemu

QEMU = "/usr/bin/qemu-system-x86_64"

# libvirt 9.0's command line for a Nova domain with no <cpu> (cpu_mode =
# none), the x86 clock timers Nova writes, and a vhost-user NIC.
GUEST = [
    QEMU, "-name", "guest=instance-00000001,debug-threads=on", "-S",
    "-machine", "pc-i440fx-7.2,usb=off,dump-guest-core=off", "-accel", "kvm",
    "-cpu", "qemu64", "-m", "256", "-overcommit", "mem-lock=off",
    "-no-user-config", "-nodefaults", "-global",
    "kvm-pit.lost_tick_policy=delay", "-no-hpet", "-no-shutdown",
    "-chardev", "socket,id=charnet0,path=/run/vhu0,server=on",
    "-netdev", json.dumps({"type": "vhost-user", "chardev": "charnet0",
                           "id": "hostnet0"}),
    "-device", json.dumps({"driver": "virtio-net-pci", "netdev": "hostnet0",
                           "id": "net0", "mac": "fa:16:3e:00:00:01",
                           "bus": "pci.0", "addr": "0x3"}),
    "-netdev", json.dumps({"type": "tap", "fd": "30", "id": "hostnet1"}),
    "-device", json.dumps({"driver": "virtio-net-pci", "netdev": "hostnet1",
                           "id": "net1"}),
    "-msg", "timestamp=on"]

PROBE = [QEMU, "-S", "-no-user-config", "-nodefaults", "-nographic",
         "-machine", "none,accel=kvm:tcg", "-qmp", "unix:/x.monitor",
         "-pidfile", "/x.pid", "-daemonize"]


def _value(argv, opt, nth=0):
    return [argv[i + 1] for i, a in enumerate(argv) if a == opt][nth]


def test_a_guest_runs_tcg_with_every_thread_and_a_cpu_with_sse42():
    out, changes = tcg_qemu.rewrite(GUEST)
    assert _value(out, "-accel") == "tcg,thread=multi"
    assert _value(out, "-cpu") == "max"
    assert "kvm-pit.lost_tick_policy=delay" not in out
    # The vhost-user NIC loses MSI-X (QEMU 7.2's TCG crash); the tap one
    # keeps it.
    vhost = json.loads(_value(out, "-device", 0))
    tap = json.loads(_value(out, "-device", 1))
    assert vhost["vectors"] == 0 and "vectors" not in tap
    assert {k: v for k, v in vhost.items() if k != "vectors"} == \
        json.loads(_value(GUEST, "-device", 0))
    assert len(changes) == 4, changes
    # Value-less flags did not shift what was read as a value.
    for flag in ("-S", "-no-user-config", "-nodefaults", "-no-hpet",
                 "-no-shutdown"):
        assert flag in out
    assert _value(out, "-name") == _value(GUEST, "-name")
    assert _value(out, "-msg") == "timestamp=on"


def test_a_probe_goes_through_unchanged():
    out, changes = tcg_qemu.rewrite(PROBE)
    assert out == PROBE and changes == []


def test_a_model_nova_chose_is_kept():
    argv = [QEMU, "-name", "guest=x", "-accel", "kvm",
            "-cpu", "Nehalem,+sse4.2"]
    out, changes = tcg_qemu.rewrite(argv)
    assert _value(out, "-cpu") == "Nehalem,+sse4.2"
    assert changes == ["-accel kvm -> -accel tcg,thread=multi"]


@pytest.mark.parametrize("argv,machine", [
    ([QEMU, "-name", "g", "-machine", "pc,accel=kvm,usb=off"],
     "pc,usb=off"),
    ([QEMU, "-name", "g", "-machine", "pc,accel=kvm:tcg"], "pc"),
    ([QEMU, "-name", "g", "-machine",
      '{"type":"pc","accel":"kvm","usb":false}'],
     '{"type":"pc","usb":false}'),
    ([QEMU, "-name", "g", "-enable-kvm"], None),
    ([QEMU, "-name", "g", "-enable-kvm", "-accel", "kvm"], None),
    ([QEMU, "-name", "g", "-accel", "kvm", "-accel", "tcg"], None),
    # No -cpu at all: QEMU's default model is qemu64 too.
    ([QEMU, "-name", "g", "-accel", "kvm"], None),
])
def test_every_way_of_asking_for_kvm_gives_one_tcg_accel(argv, machine):
    out, _ = tcg_qemu.rewrite(argv)
    assert out.count("-accel") == 1
    assert _value(out, "-accel") == "tcg,thread=multi"
    assert "kvm" not in " ".join(out[1:]).replace("guest=", "")
    assert "-enable-kvm" not in out
    if machine is not None:
        assert _value(out, "-machine") == machine


def test_host_passthrough_becomes_max():
    out, changes = tcg_qemu.rewrite([QEMU, "-name", "g", "-accel", "kvm",
                                     "-cpu", "host,migratable=on"])
    assert _value(out, "-cpu") == "max"
    assert "-cpu host,migratable=on -> -cpu max" in changes


def test_classic_device_syntax_gets_vectors_too():
    argv = [QEMU, "-name", "g", "-netdev", "vhost-user,id=n0,chardev=c0",
            "-device", "virtio-net-pci,netdev=n0,vectors=3,mac=x"]
    out, _ = tcg_qemu.rewrite(argv)
    assert _value(out, "-device") == \
        "virtio-net-pci,netdev=n0,mac=x,vectors=0"


words = st.sampled_from(["-S", "-m", "256", "-no-hpet", "-smp", "2",
                         "-device", "{\"driver\":\"isa-serial\"}",
                         "-chardev", "file,id=c", "-append", "quiet"])


@given(st.lists(words, max_size=12))
def test_nothing_else_changes(extra):
    argv = [QEMU, "-name", "g", "-accel", "kvm", "-cpu", "Nehalem", *extra]
    out, _ = tcg_qemu.rewrite(argv)
    assert out == [QEMU, "-name", "g", "-accel", "tcg,thread=multi",
                   "-cpu", "Nehalem", *extra]


def test_the_wrapper_execs_the_real_qemu_with_the_new_line(tmp_path):
    # A stand-in "QEMU" that prints what it was given, at a path that
    # needs quoting.
    tmp_path = tmp_path / "it's here"
    tmp_path.mkdir()
    real = tmp_path / "qemu"
    real.write_text("#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done\n")
    real.chmod(0o755)
    wrapper = tmp_path / "wrapper"
    wrapper.write_text(tcg_qemu.wrapper_script(sys.executable, str(real)))
    wrapper.chmod(0o755)
    res = subprocess.run([str(wrapper), "-name", "g", "-accel", "kvm"],
                         capture_output=True, text=True, timeout=30,
                         env={"PATH": os.environ.get("PATH", "/usr/bin")})
    assert res.returncode == 0, res.stderr
    assert res.stdout.split("\n")[:4] == ["-name", "g", "-accel",
                                          "tcg,thread=multi"]
    assert f"{tcg_qemu.LOG_PREFIX} -accel kvm -> -accel tcg" in res.stderr


# -- when the lab uses it ------------------------------------------------

def _libvirt(tmp_path, monkeypatch, decision, kvm_why=None):
    from nova_rdt.lab import libvirtd
    from nova_rdt.lab.guest import boot
    monkeypatch.setattr(libvirtd, "kvm_unavailable_reason", lambda: kvm_why)
    lv = libvirtd.Libvirt(str(tmp_path), supervisor=None)
    monkeypatch.setattr(lv, "linux_accel",
                        lambda image=None: boot.AccelDecision(*decision))
    return lv


def test_never_where_kvm_boots_linux(tmp_path, monkeypatch):
    lv = _libvirt(tmp_path, monkeypatch, ("kvm", "reached userspace"))
    lv.prepare_for_linux()
    assert lv.tcg_for_kvm is None and lv.forced == []
    assert lv.linux_domain_type == "kvm"
    assert not os.path.exists(lv.bin_dir)
    assert lv._env().get("PATH") == os.environ.get("PATH")


def test_where_kvm_hangs_linux_kvm_domains_get_the_wrapper(tmp_path,
                                                           monkeypatch):
    lv = _libvirt(tmp_path, monkeypatch, ("tcg", "stopped at Probing EDD"))
    lv.prepare_for_linux()
    assert lv.linux_domain_type == "kvm"
    assert lv.forced and "stopped at Probing EDD" in lv.forced[0]
    wrapper = os.path.join(lv.bin_dir, "qemu-system-x86_64")
    assert os.access(wrapper, os.X_OK)
    assert lv._env()["PATH"].split(":")[0] == lv.bin_dir
    with open(wrapper) as f:
        assert "tcg_qemu.py" in f.read()


def test_with_no_kvm_at_all_domains_are_qemu(tmp_path, monkeypatch):
    lv = _libvirt(tmp_path, monkeypatch, ("tcg", "/dev/kvm: absent"),
                  kvm_why="/dev/kvm: No such file or directory")
    lv.prepare_for_linux()
    assert lv.tcg_for_kvm is None
    assert lv.linux_domain_type == "qemu"
    with pytest.raises(Exception, match="needs a /dev/kvm that answers"):
        lv.use_tcg_for_kvm("forced")
