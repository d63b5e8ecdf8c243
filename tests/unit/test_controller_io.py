"""The controller's inputs and outputs: SLO specs and sources, the state
file and restore, metrics, [rdt_controller] and the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from hypothesis import given
from hypothesis import strategies as st
import pytest

from nova_rdt.cmd import main as cli
from nova_rdt.controller import metrics as metrics_mod
from nova_rdt.controller import slo_spec
from nova_rdt.controller import sources
from nova_rdt.controller import state as state_mod
from nova_rdt.emulator import mount
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.resctrl.schemata import Schemata

# -- SLO specs and sources ---------------------------------------------------

def test_slo_spec_parses_both_kinds():
    s = slo_spec.parse("vm-redis=0.5@file:/run/redis-p99")
    assert (s.instance, s.target, s.kind, s.where) == \
        ("vm-redis", 0.5, "file", "/run/redis-p99")
    q = slo_spec.parse('fwd=2e-5@prometheus:max(x{a="b"}) @ 1')
    assert q.kind == "prometheus" and q.where == 'max(x{a="b"}) @ 1'


@pytest.mark.parametrize("text,words", [
    ("vm", "expected INSTANCE=TARGET@"),
    ("vm=1", "expected INSTANCE=TARGET@"),
    ("../x=1@file:/a", "not an instance name"),
    ("vm=-1@file:/a", "positive number"),
    ("vm=nan@file:/a", "positive number"),
    ("vm=abc@file:/a", "positive number"),
    ("vm=1@http:/a", "file:PATH or prometheus:QUERY"),
    ("vm=1@file:", "file:PATH or prometheus:QUERY"),
])
def test_slo_spec_errors_name_the_option(text, words):
    with pytest.raises(slo_spec.SloSpecError) as e:
        slo_spec.parse(text)
    assert "[rdt_controller] slo" in str(e.value) and words in str(e.value)


def test_slo_spec_twice():
    with pytest.raises(slo_spec.SloSpecError, match="given twice"):
        slo_spec.parse_all(["a=1@file:/x", "a=2@file:/y"])


@given(st.text(max_size=60))
def test_slo_spec_never_crashes(text):
    try:
        slo_spec.parse(text)
    except slo_spec.SloSpecError:
        pass
    assert slo_spec.parse_value(text) is None or \
        slo_spec.parse_value(text) >= 0


def test_file_source(tmp_path):
    p = tmp_path / "p99"
    src = sources.FileSource(str(p), max_age=5)
    assert src.read() is None                    # missing: no signal
    p.write_text("0.42 seconds\n")
    assert src.read() == 0.42
    p.write_text("fast\n")
    assert src.read() is None
    p.write_text("1\n")
    old = time.time() - 60
    os.utime(p, (old, old))
    assert src.read() is None                    # stale
    assert sources.FileSource(str(p), max_age=0).read() == 1.0


def test_prometheus_answers():
    vec = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {}, "value": [1, "0.25"]}]}}
    assert sources.parse_answer(vec) == 0.25
    sc = {"status": "success", "data": {"resultType": "scalar",
                                        "result": [1, "3"]}}
    assert sources.parse_answer(sc) == 3.0
    one = vec["data"]["result"][0]
    two = {"status": "success", "data": {"resultType": "vector",
                                         "result": [one, one]}}
    assert sources.parse_answer(two) is None
    assert sources.parse_answer({"status": "error", "error": "x"}) is None
    assert sources.parse_answer([]) is None
    assert sources.parse_answer({"status": "success", "data": {
        "resultType": "vector", "result": [{"value": [1, "NaN"]}]}}) is None


def test_prometheus_source_down_is_no_signal():
    src = sources.PrometheusSource("http://127.0.0.1:9", "up", timeout=0.5)
    assert src.read() is None


# -- the state file and restore ----------------------------------------------

@pytest.fixture(scope="module")
def emulated():
    reason = mount.fuse_unavailable_reason()
    if reason:
        pytest.skip(f"FUSE emulator unavailable: {reason}")
    emu = mount.Emulator("gold-6252")
    emu.start()
    yield emu
    emu.stop()


@pytest.fixture
def host(emulated):
    """An emulated host with one class group lowered and a libvirt
    group beside it (writes need the kernel model's merging, so a
    mounted emulator, not a copy of files)."""
    root = emulated.mountpoint
    for name in os.listdir(root):
        if name.startswith(("nova-rdt-", "qemu-")):
            os.rmdir(os.path.join(root, name))
    fs = Resctrl(root, sysfs_cpu=emulated.sysfs_cpu)
    fs.write_schemata(fs.root_group(), Schemata({"L3": {0: 3, 1: 3}}),
                      allow_root=True)
    g = fs.create_group("nova-rdt-class-lp")
    fs.write_schemata(g, Schemata({"L3": {0: 0xc, 1: 0xc},
                                   "MB": {0: 10, 1: 10}}))
    os.mkdir(os.path.join(root, "qemu-1-vm-vcpus_0"))
    with open(os.path.join(root, "qemu-1-vm-vcpus_0", "schemata"),
              "w") as f:
        f.write("L3:0=600;1=600\n")
    return fs


def write_state(path, groups, pid=1 << 22, running=True):
    st_ = state_mod.State(pid, 0, running, {
        g: state_mod.ClassRecord(s, s) for g, s in groups.items()})
    state_mod.save(str(path), st_)


def test_restore_puts_static_values_back(tmp_path, host):
    fs = host
    path = tmp_path / "controller.json"
    write_state(path, {"nova-rdt-class-lp": {"L3": {0: 0x3c, 1: 0x3c},
                                             "MB": {0: 100, 1: 100}}})
    assert state_mod.restore(fs, str(path)) == ["nova-rdt-class-lp"]
    text = open(os.path.join(fs.root, "nova-rdt-class-lp",
                             "schemata")).read()
    assert "L3:0=3c;1=3c" in text and "MB:0=100;1=100" in text
    # Had libvirt given one of those ways to a VM meanwhile, only the MB
    # would come back.
    g = fs.group("nova-rdt-class-lp")
    fs.write_schemata(g, Schemata({"L3": {0: 0xc, 1: 0xc},
                                   "MB": {0: 10, 1: 10}}))
    with open(os.path.join(fs.root, "qemu-1-vm-vcpus_0", "schemata"),
              "w") as f:
        f.write("L3:0=30;1=600\n")
    write_state(path, {"nova-rdt-class-lp": {"L3": {0: 0x3c, 1: 0x3c},
                                             "MB": {0: 100, 1: 100}}})
    assert state_mod.restore(fs, str(path)) == ["nova-rdt-class-lp"]
    s = g.schemata()
    assert s.domains("L3") == {0: 0xc, 1: 0xc}
    assert s.domains("MB") == {0: 100, 1: 100}
    assert state_mod.load(str(path)).running is False
    # Stopped cleanly now: a second restore does nothing.
    assert state_mod.restore(fs, str(path)) == []


def test_restore_waits_for_a_live_controller(tmp_path, host):
    fs = host
    path = tmp_path / "controller.json"
    st_ = state_mod.State(os.getpid(), None, True, {
        "nova-rdt-class-lp": state_mod.ClassRecord({"MB": {0: 100}},
                                                   {"MB": {0: 10}})})
    st_.pid_start = state_mod.procinfo.proc_start_time(os.getpid())
    state_mod.save(str(path), st_)
    assert state_mod.restore(fs, str(path)) == []
    assert state_mod.restore(fs, str(path), force=True) == \
        ["nova-rdt-class-lp"]


def test_restore_touches_only_class_groups_and_valid_masks(tmp_path, host):
    fs = host
    path = tmp_path / "controller.json"
    before = open(os.path.join(fs.root, "qemu-1-vm-vcpus_0",
                               "schemata")).read()
    write_state(path, {
        "qemu-1-vm-vcpus_0": {"MB": {0: 10, 1: 10}},       # libvirt's
        "nova-rdt-pmd": {"MB": {0: 10, 1: 10}},            # not a class
        "nova-rdt-class-lp": {"L3": {0: 0x5, 1: 0x5}},     # not contiguous
        "nova-rdt-class-gone": {"MB": {0: 100, 1: 100}},   # no such group
    })
    assert state_mod.restore(fs, str(path)) == []
    assert open(os.path.join(fs.root, "qemu-1-vm-vcpus_0",
                             "schemata")).read() == before


@pytest.mark.parametrize("doc,words", [
    ("[]", "malformed"),
    ('{"version": 2}', "version 2"),
    ('{"version": 1, "pid": 1, "pid_start": 0, "running": true, '
     '"groups": {"../x": {"static": {}, "current": {}}}}', "not a group"),
    ('{"version": 1, "pid": 1, "pid_start": 0, "running": true, '
     '"groups": {"g": {"static": {"XX": {}}, "current": {}}}}',
     "unknown resource"),
    ('{"version": 1, "pid": 1, "pid_start": 0, "running": true, '
     '"groups": {"g": {"static": {"MB": {"a": 1}}, "current": {}}}}',
     "malformed"),
    ('{"version": 1, "pid": "1", "pid_start": 0, "running": true, '
     '"groups": {}}', "malformed"),
])
def test_state_file_is_hostile_input(tmp_path, doc, words):
    p = tmp_path / "controller.json"
    p.write_text(doc)
    with pytest.raises(state_mod.StateError) as e:
        state_mod.load(str(p))
    assert str(p) in str(e.value) and words in str(e.value)


def test_state_round_trip(tmp_path):
    s = state_mod.State(12, 34, True, {"g": state_mod.ClassRecord(
        {"L3": {0: 0xf0}, "MB": {1: 50}}, {"L3": {0: 0x30}, "MB": {1: 10}})})
    state_mod.save(str(tmp_path / "s.json"), s)
    assert state_mod.load(str(tmp_path / "s.json")) == s
    assert state_mod.load(str(tmp_path / "none.json")) is None


# -- metrics ------------------------------------------------------------------

def test_metrics_text():
    mt = metrics_mod.Metrics('h"1', "slack", False)
    mt.set_class("nova-rdt-class-lp", 30, 100, 2, 4, 1.5e8)
    mt.count("nova-rdt-class-lp", "slo_violated", "applied")
    mt.count("nova-rdt-class-lp", "slo_violated", "applied")
    mt.slo["vm"] = (0.9, 1.0)
    text = mt.render()
    # prometheus-client's text, as the exporter's: labels sorted, values
    # as floats, the host's quote escaped.
    assert 'nova_rdt_controller_class_mb{class="nova-rdt-class-lp",' \
           'host="h\\"1"} 30.0' in text
    assert 'outcome="applied",reason="slo_violated"} 2.0' in text
    assert "# TYPE nova_rdt_controller_decisions_total counter" in text
    assert 'nova_rdt_controller_slo_target{host="h\\"1",instance="vm"} 1.0' \
        in text
    mt.drop_class("nova-rdt-class-lp")
    assert "class_mb{" not in mt.render()


# -- configuration and the command line --------------------------------------

def run_cli(capsys, *argv):
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_refuses_bad_config_naming_it(tmp_path, capsys):
    conf = tmp_path / "c.conf"
    conf.write_text("[rdt_controller]\npolcy = slack\n")
    code, _out, err = run_cli(capsys, "controller", "--config-file",
                              str(conf), "--restore")
    assert code == 2 and f"{conf}:2: unknown option [rdt_controller] " \
        "polcy" in err and "Traceback" not in err
    conf.write_text("[rdt_controller]\nperiod = nan\n")
    code, _out, err = run_cli(capsys, "controller", "--config-file",
                              str(conf), "--restore")
    assert code == 2 and "[rdt_controller] period" in err
    conf.write_text("[rdt_controller]\npolicy = heracles\n")
    code, _out, err = run_cli(capsys, "controller", "--config-file",
                              str(conf), "--restore")
    assert code == 2 and "[rdt_controller] policy" in err


def test_cli_slack_needs_a_signal(tmp_path, capsys, host):
    fs = host
    conf = tmp_path / "c.conf"
    conf.write_text(f"[rdt]\nresctrl_root = {fs.root}\nstate_path = "
                    f"{tmp_path}\n[rdt_controller]\npolicy = slack\n")
    code, _out, err = run_cli(capsys, "controller", "--config-file",
                              str(conf), "--no-metrics", "--no-guardian")
    assert code == 2 and "needs at least one [rdt_controller] slo" in err
    conf.write_text(f"[rdt]\nresctrl_root = {fs.root}\n[rdt_controller]\n"
                    f"slo = vm=x@file:/a\n")
    code, _out, err = run_cli(capsys, "controller", "--config-file",
                              str(conf), "--no-metrics", "--no-guardian")
    assert code == 2 and "positive number" in err


def test_cli_restore(tmp_path, capsys, host):
    fs = host
    path = tmp_path / "controller.json"
    write_state(path, {"nova-rdt-class-lp": {"MB": {0: 100, 1: 100}}})
    code, out, _err = run_cli(capsys, "controller", "--no-config-files",
                              "--resctrl-root", fs.root, "--state-file",
                              str(path), "--restore")
    assert code == 0 and "restored: nova-rdt-class-lp" in out
    path.write_text("{")
    code, _out, err = run_cli(capsys, "controller", "--no-config-files",
                              "--resctrl-root", fs.root, "--state-file",
                              str(path), "--restore")
    assert code == 2 and str(path) in err and "malformed" in err


def test_conf_module_registers_once():
    from oslo_config import cfg

    from nova_rdt.conf import controller as conf_ctl
    conf = cfg.ConfigOpts()
    conf_ctl.register_opts(conf)
    conf_ctl.register_opts(conf)
    conf([])
    assert conf.rdt_controller.policy == "bandwidth-share"
    assert conf.rdt_controller.port == 9788
    (group, opts), = conf_ctl.list_opts()
    assert group.name == "rdt_controller" and len(opts) > 10


def test_guardian_restores_when_its_parent_dies(tmp_path, host):
    """The guardian is a separate process: killing its parent (here, the
    pipe's writer) with SIGKILL must still restore."""
    fs = host
    path = tmp_path / "controller.json"
    write_state(path, {"nova-rdt-class-lp": {"MB": {0: 100, 1: 100}}})
    parent = subprocess.Popen(
        [sys.executable, "-c",
         "import subprocess, sys, time\n"
         "g = subprocess.Popen([sys.executable, '-m', "
         "'nova_rdt.controller.guardian', '--state-file', sys.argv[1], "
         "'--resctrl-root', sys.argv[2], '--sysfs-cpu-root', '/nonexistent',"
         " '--prefix', 'nova-rdt-'], stdin=subprocess.PIPE)\n"
         "print(g.pid, flush=True)\n"
         "time.sleep(60)\n", str(path), fs.root],
        stdout=subprocess.PIPE, cwd=os.getcwd(), text=True)
    guardian = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if json.loads(path.read_text())["running"] is False:
            break
        time.sleep(0.1)
    text = open(os.path.join(fs.root, "nova-rdt-class-lp",
                             "schemata")).read()
    assert "MB:0=100;1=100" in text
    try:
        os.waitpid(guardian, 0)
    except ChildProcessError:
        pass


def test_guardian_waits_for_a_dying_owner_then_restores(tmp_path, host):
    """EOF reaches the guardian before its dying parent stops being
    listed as running: it must wait for that, not give up."""
    from nova_rdt.host import procinfo

    fs = host
    path = tmp_path / "controller.json"
    owner = subprocess.Popen(["sleep", "1"])
    st_ = state_mod.State(owner.pid, procinfo.proc_start_time(owner.pid),
                          True, {"nova-rdt-class-lp": state_mod.ClassRecord(
                              {"MB": {0: 100, 1: 100}},
                              {"MB": {0: 100, 1: 100}})})
    state_mod.save(str(path), st_)
    g = fs.group("nova-rdt-class-lp")
    fs.write_schemata(g, Schemata({"MB": {0: 10, 1: 10}}))
    guardian = subprocess.Popen(
        [sys.executable, "-m", "nova_rdt.controller.guardian",
         "--state-file", str(path), "--resctrl-root", fs.root,
         "--sysfs-cpu-root", "/nonexistent", "--prefix", "nova-rdt-"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = guardian.communicate(timeout=30)
    finally:
        owner.wait()
    assert guardian.returncode == 0, out
    assert "restored nova-rdt-class-lp" in out, out
    assert "MB:0=100;1=100" in open(os.path.join(
        fs.root, "nova-rdt-class-lp", "schemata")).read()


def test_decision_notification_is_versioned_and_sent():
    from oslo_config import cfg
    from oslo_messaging.notify import _impl_test

    from nova_rdt.controller import notify

    body = notify.payload(
        host="h", policy="slack", group="nova-rdt-class-lp",
        rdt_class="lp", reason="slo_violated", outcome="applied",
        dry_run=False, mb=10, previous_mb=100, l3_ways=1,
        previous_l3_ways=4, bandwidth_bytes=None)
    assert body["nova_object.name"] == "RdtControllerDecisionPayload"
    assert body["nova_object.version"] == "1.0"
    assert body["nova_object.namespace"] == "nova_rdt"
    assert body["nova_object.data"]["mb"] == 10
    with pytest.raises(ValueError):
        notify.payload(host="h", mb="lots")
    import oslo_messaging

    conf = cfg.ConfigOpts()
    conf([])
    oslo_messaging.get_notification_transport(conf, url="fake:/")
    conf.set_override("driver", ["test"],
                      group="oslo_messaging_notifications")
    conf.set_override("transport_url", "fake:/",
                      group="oslo_messaging_notifications")
    _impl_test.reset()
    sender = notify.Sender(conf, "h")
    sender.send(body)
    sender.close()
    assert sender.sent == 1 and sender.dropped == 0
    (ctxt, message, priority, retry), = _impl_test.NOTIFICATIONS
    assert message["event_type"] == "rdt.controller.decision"
    assert message["payload"] == body and priority == "INFO"
