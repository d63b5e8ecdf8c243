"""Every exit code every ``nova-rdt`` command declares, shown by running it.

Each command's parser declares its codes (``exit_codes``; the table in
doc/source/cli.rst is made from them).  Here each (command, code) has a
test named ``test_exit_<command>_<code>`` that runs the real command in
a subprocess and gets that code, or is named in :data:`ELSEWHERE` (codes
that need a whole configured host or the lab, shown by those tests).
:func:`test_every_declared_code_is_shown` fails when a command declares
a code no test shows, or a test shows a code nobody declares.
"""

from __future__ import annotations

import ast
import json
import os
import signal
import socket
import subprocess
import sys

import pytest

from nova_rdt.cmd import reference
from nova_rdt.emulator import mount

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

#: Codes shown by tests elsewhere: they need a host configured as a
#: deployment leaves it, or the whole lab.
ELSEWHERE = {
    ("status upgrade check", 0): "tests/functional/test_status_check.py::"
                                 "test_a_configured_compute_passes_as_a_"
                                 "compute",
    ("status upgrade check", 1): "tests/functional/test_status_check.py::"
                                 "test_a_configured_host_passes",
    ("status upgrade check", 2): "tests/functional/test_status_check.py::"
                                 "test_nothing_configured",
    ("status upgrade check", 255): "tests/functional/test_status_check.py::"
                                   "test_bad_input_is_one_line",
    ("lab", 0): "tests/integration/test_lab_demo.py::"
                "test_onp_scenario_end_to_end",
}


def _slug(name: str, code) -> str:
    word = "command_status" if code == "N" else str(code)
    return "test_exit_" + name.replace(" ", "_").replace("-", "_") + \
        "_" + word


def _cli(*argv, timeout=120, **kw):
    return subprocess.run([sys.executable, "-m", "nova_rdt.cmd.main",
                           *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, **kw)


def _one_line(res, code, words=""):
    """The code, and (for a failure) one line on stderr, no traceback."""
    assert res.returncode == code, (res.returncode, res.stdout, res.stderr)
    if code:
        assert "Traceback" not in res.stderr, res.stderr
        assert words in res.stderr, res.stderr


def _defined_tests(rel: str) -> set[str]:
    with open(os.path.join(REPO, rel)) as f:
        tree = ast.parse(f.read())
    return {n.name for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_every_declared_code_is_shown():
    declared = {(leaf.name, code) for leaf in reference.leaves()
                for code in leaf.exit_codes}
    here = {n for n in globals() if n.startswith("test_exit_")}
    shown = {(leaf.name, code) for leaf in reference.leaves()
             for code in leaf.exit_codes
             if _slug(leaf.name, code) in here} | set(ELSEWHERE)
    assert declared - shown == set(), f"no test shows {declared - shown}"
    slugs = {_slug(name, code) for name, code in declared}
    assert here - slugs == set(), f"tests of undeclared codes: " \
        f"{here - slugs}"
    for key, where in ELSEWHERE.items():
        assert key in declared, key
        path, name = where.split("::")
        assert name in _defined_tests(path), where


# -- fixtures --------------------------------------------------------------

@pytest.fixture
def snapshot(tmp_path):
    """A resctrl tree copied to plain files: readable, not writable as
    the kernel's (mkdir of a group fails)."""
    from nova_rdt.emulator import topology
    from tests.kernel_fixtures import make_kernel
    from tests.kernel_fixtures import materialize

    k, _, _ = make_kernel("gold-6252")
    root = materialize(k, str(tmp_path / "resctrl"))
    cpu = topology.write_tree(k.profile, str(tmp_path / "cpu"))
    return root, cpu


@pytest.fixture(scope="module")
def emulated():
    reason = mount.fuse_unavailable_reason()
    if reason:
        pytest.skip(f"FUSE emulator unavailable: {reason}")
    emu = mount.Emulator("gold-6252")
    emu.start()
    yield emu
    emu.stop()


def _conf(tmp_path, root, cpu, extra=""):
    conf = tmp_path / "nova.conf"
    conf.write_text(f"[rdt]\nresctrl_root = {root}\nsysfs_cpu_root = {cpu}\n"
                    f"state_path = {tmp_path}/state\n"
                    f"ovsdb_connection = unix:{tmp_path}/no-db.sock\n"
                    + extra)
    return str(conf)


def _busy_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    return s, s.getsockname()[1]


# -- host show -------------------------------------------------------------

def test_exit_host_show_0(snapshot):
    root, cpu = snapshot
    res = _cli("host", "show", "--json", "--resctrl-root", root,
               "--sysfs-cpu-root", cpu)
    _one_line(res, 0)
    assert json.loads(res.stdout)


def test_exit_host_show_1(tmp_path):
    _one_line(_cli("host", "show", "--resctrl-root", str(tmp_path)), 1,
              "no resctrl filesystem at")


def test_exit_host_show_2():
    _one_line(_cli("host", "show", "--jsn"), 2, "unrecognized arguments")


# -- emulate ---------------------------------------------------------------

def test_exit_emulate_0():
    res = _cli("emulate", "--list-profiles", "--json")
    _one_line(res, 0)
    assert "gold-6252" in json.loads(res.stdout)["profiles"]


def test_exit_emulate_1(tmp_path):
    # A regular file where the mount point should be (or no FUSE).
    (tmp_path / "m").write_text("")
    res = _cli("emulate", "--mountpoint", str(tmp_path / "m"))
    _one_line(res, 1, "nova-rdt: ")


def test_exit_emulate_2():
    _one_line(_cli("emulate", "--profile", "xeon-9000"), 2,
              "unknown profile 'xeon-9000'")


def test_exit_emulate_command_status():
    reason = mount.fuse_unavailable_reason()
    if reason:
        pytest.skip(f"FUSE emulator unavailable: {reason}")
    res = _cli("emulate", "--", "sh", "-c",
               'test -e "$NOVA_RDT_RESCTRL_ROOT/schemata" && exit 3')
    assert res.returncode == 3, res.stderr


# -- hook install / uninstall ----------------------------------------------

def _hook(tmp_path, verb, *args, hooks=None, settings=None):
    return _cli("hook", verb, "--hooks-dir",
                str(hooks or tmp_path / "hooks"), "--settings-path",
                str(settings or tmp_path / "hook.json"), *args)


def test_exit_hook_install_0(tmp_path):
    _one_line(_hook(tmp_path, "install", "--no-config-files"), 0)
    assert (tmp_path / "hooks" / "qemu.d" / "nova-rdt").exists()


def test_exit_hook_install_1(tmp_path):
    (tmp_path / "file").write_text("")
    _one_line(_hook(tmp_path, "install", "--no-config-files",
                    hooks=tmp_path / "file" / "hooks"), 1, "Not a directory")


def test_exit_hook_install_2(tmp_path):
    _one_line(_hook(tmp_path, "install", "--config-file",
                    str(tmp_path / "nope.conf")), 2, "no such file")


def test_exit_hook_uninstall_0(tmp_path):
    _one_line(_hook(tmp_path, "uninstall"), 0)


def test_exit_hook_uninstall_1(tmp_path):
    (tmp_path / "hook.json").mkdir()
    _one_line(_hook(tmp_path, "uninstall"), 1, "nova-rdt: ")


def test_exit_hook_uninstall_2(tmp_path):
    _one_line(_hook(tmp_path, "uninstall", "--python", "x"), 2,
              "unrecognized arguments: --python")


# -- pmd sync --------------------------------------------------------------

def test_pmd_sync_on_a_host_not_prepared_exits_1(emulated, tmp_path):
    """Before nova-compute prepared the host, every way is the root's:
    a PMD COS over "the host's ways" would take them all.  Refused, and
    nothing is written."""
    conf = _conf(tmp_path, emulated.mountpoint, emulated.sysfs_cpu)
    res = _cli("pmd", "sync", "--config-file", conf)
    _one_line(res, 1, "not prepared")
    assert "reserved_host_ways" in res.stderr
    assert not os.path.exists(os.path.join(emulated.mountpoint,
                                           "nova-rdt-pmd"))


def test_exit_pmd_sync_0(emulated, tmp_path):
    from nova_rdt.host import prep
    from nova_rdt.resctrl.groups import Resctrl

    prep.prepare(Resctrl(emulated.mountpoint, sysfs_cpu=emulated.sysfs_cpu),
                 2, 0)
    conf = _conf(tmp_path, emulated.mountpoint, emulated.sysfs_cpu)
    res = _cli("pmd", "sync", "--json", "--config-file", conf)
    _one_line(res, 0)
    assert json.loads(res.stdout)["summary"].startswith("nova-rdt-pmd: ")


def test_exit_pmd_sync_1(snapshot, tmp_path):
    root, cpu = snapshot
    with open(os.path.join(root, "schemata"), "w") as f:
        f.write("L3:0=3;1=3\n")          # prepared, but not writable
    _one_line(_cli("pmd", "sync", "--config-file",
                   _conf(tmp_path, root, cpu)), 1, "refused")


def test_exit_pmd_sync_2(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("[rdt]\nreserved_host_way = 3\n")
    _one_line(_cli("pmd", "sync", "--config-file", str(conf)), 2,
              "unknown option [rdt] reserved_host_way")


# -- reconcile -------------------------------------------------------------

def test_exit_reconcile_0(emulated, tmp_path):
    conf = _conf(tmp_path, emulated.mountpoint, emulated.sysfs_cpu)
    res = _cli("reconcile", "--config-file", conf)
    _one_line(res, 0)
    assert res.stdout.splitlines()[-1].startswith("reconcile: converged")


def test_exit_reconcile_1(tmp_path):
    conf = _conf(tmp_path, tmp_path / "not-mounted", tmp_path / "cpu")
    res = _cli("reconcile", "--json", "--config-file", conf)
    assert res.returncode == 1, res.stderr
    assert json.loads(res.stdout)["degraded"][0].startswith(
        "resctrl_unavailable")


def test_exit_reconcile_2(tmp_path):
    bad = tmp_path / "hook.json"
    bad.write_text("{")
    _one_line(_cli("reconcile", "--settings", str(bad)), 2, "not JSON")


# -- exporter --------------------------------------------------------------

def test_exit_exporter_0(snapshot, tmp_path):
    root, cpu = snapshot
    proc = subprocess.Popen(
        [sys.executable, "-m", "nova_rdt.cmd.main", "exporter",
         "--no-config-files", "--port", "0", "--listen", "127.0.0.1",
         "--resctrl-root", root, "--sysfs-cpu-root", cpu, "--state-path",
         str(tmp_path), "--host", "h", "--notify-interval", "0"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    try:
        assert "metrics at /metrics" in proc.stdout.readline()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_exit_exporter_1(snapshot, tmp_path):
    root, cpu = snapshot
    sock, port = _busy_port()
    with sock:
        res = _cli("exporter", "--no-config-files", "--port", str(port),
                   "--listen", "127.0.0.1", "--resctrl-root", root,
                   "--sysfs-cpu-root", cpu, "--state-path", str(tmp_path),
                   "--notify-interval", "0")
    _one_line(res, 1, f"cannot listen on 127.0.0.1:{port}")


def test_exit_exporter_2():
    _one_line(_cli("exporter", "--port", "abc"), 2,
              "argument --port: 'abc' is not a port")


# -- controller ------------------------------------------------------------

def test_exit_controller_0(tmp_path):
    res = _cli("controller", "--no-config-files", "--resctrl-root",
               str(tmp_path), "--state-file", str(tmp_path / "c.json"),
               "--restore")
    _one_line(res, 0)
    assert res.stdout.strip() == "restored: nothing to restore"


def test_exit_controller_1(emulated, tmp_path):
    sock, port = _busy_port()
    with sock:
        res = _cli("controller", "--no-config-files", "--resctrl-root",
                   emulated.mountpoint, "--sysfs-cpu-root",
                   emulated.sysfs_cpu, "--state-path", str(tmp_path),
                   "--listen", "127.0.0.1", "--port", str(port),
                   "--no-guardian", timeout=60)
    _one_line(res, 1, f"cannot listen on 127.0.0.1:{port}")


def test_exit_controller_2(tmp_path):
    conf = tmp_path / "c.conf"
    conf.write_text("[rdt_controller]\npolcy = slack\n")
    _one_line(_cli("controller", "--config-file", str(conf), "--restore"),
              2, "unknown option [rdt_controller] polcy")


# -- rfc2544 run -----------------------------------------------------------

def _rfc(tmp_path, config: str):
    (tmp_path / "c.yaml").write_text(config)
    return _cli("rfc2544", "run", "--config", str(tmp_path / "c.yaml"),
                "--out", str(tmp_path / "out"), "--no-plots")


def test_exit_rfc2544_run_0(tmp_path):
    pytest.importorskip("yaml", reason="needs the rfc2544 extra")
    res = _rfc(tmp_path, "generator: {type: simulated, capacity_pps: "
                         "1000000, line_rate_pps: 2000000}\n"
                         "trial_duration: 0.01\nlatency_duration: 0.01\n"
                         "frame_sizes: [64]\n")
    _one_line(res, 0)
    assert (tmp_path / "out" / "report.json").exists()


def test_exit_rfc2544_run_1(tmp_path):
    pytest.importorskip("yaml", reason="needs the rfc2544 extra")
    res = _rfc(tmp_path, "generator: {type: software, tx_interface: "
                         "nosuch0, rx_interface: nosuch1}\n"
                         "trial_duration: 0.01\nframe_sizes: [64]\n")
    assert res.returncode == 1, res.stderr
    assert "generator failed" in res.stderr


def test_exit_rfc2544_run_2(tmp_path):
    _one_line(_rfc(tmp_path, "generator: {type: simulated}\n"), 2,
              "generator.capacity_pps is required")


# -- shim install / uninstall, install-shim --------------------------------

def _shim(tmp_path, *argv):
    return _cli(*argv, "--virt-dir", str(tmp_path))


def _not_ours(tmp_path):
    (tmp_path / "rdt").mkdir()
    (tmp_path / "rdt" / "__init__.py").write_text("# not ours\n")


def test_exit_shim_install_0(tmp_path):
    _one_line(_shim(tmp_path, "shim", "install"), 0)
    assert (tmp_path / "rdt" / "__init__.py").exists()


def test_exit_shim_install_1(tmp_path):
    (tmp_path / "rdt").write_text("")        # a file where the package goes
    _one_line(_shim(tmp_path, "shim", "install"), 1, "Not a directory")


def test_exit_shim_install_2(tmp_path):
    _not_ours(tmp_path)
    _one_line(_shim(tmp_path, "shim", "install"), 2,
              "is not nova-rdt's shim")


def test_exit_shim_uninstall_0(tmp_path):
    _one_line(_shim(tmp_path, "shim", "install"), 0)
    res = _shim(tmp_path, "shim", "uninstall")
    _one_line(res, 0)
    assert res.stdout.strip().endswith(": removed")


def test_exit_shim_uninstall_1(tmp_path):
    (tmp_path / "rdt" / "__init__.py").mkdir(parents=True)
    _one_line(_shim(tmp_path, "shim", "uninstall"), 1, "Is a directory")


def test_exit_shim_uninstall_2(tmp_path):
    _not_ours(tmp_path)
    _one_line(_shim(tmp_path, "shim", "uninstall"), 2,
              "is not nova-rdt's shim; left in place")


def test_exit_install_shim_0(tmp_path):
    res = _shim(tmp_path, "install-shim")
    assert res.returncode == 0 and "is deprecated" in res.stderr
    res = _shim(tmp_path, "install-shim", "--uninstall")
    assert res.returncode == 0 and res.stdout.strip().endswith(": removed")


def test_exit_install_shim_1(tmp_path):
    (tmp_path / "rdt").write_text("")
    _one_line(_shim(tmp_path, "install-shim"), 1, "Not a directory")


def test_exit_install_shim_2(tmp_path):
    _not_ours(tmp_path)
    _one_line(_shim(tmp_path, "install-shim", "--uninstall"), 2,
              "is not nova-rdt's shim")


# -- lab -------------------------------------------------------------------

def test_exit_lab_1(tmp_path):
    """The lab stops at its first step (mounting resctrl, before libvirtd
    or OVS start) when told to use a resctrl this machine does not have,
    and says so: exit 1."""
    if os.path.ismount("/sys/fs/resctrl"):
        pytest.skip("/sys/fs/resctrl is mounted here: --resctrl real "
                    "would run the lab")
    pytest.importorskip("nova", reason="the lab needs the lab extra")
    res = _cli("lab", "--resctrl", "real", "--out", str(tmp_path / "lab"),
               timeout=300)
    assert res.returncode == 1, res.stdout[-2000:] + res.stderr[-2000:]
    assert "is not a mounted resctrl filesystem" in res.stderr
    assert "everything stopped; nothing left behind" in res.stdout


def test_exit_lab_2(tmp_path):
    _one_line(_cli("lab", "--scenario", "nope"), 2,
              "argument --scenario: invalid choice: 'nope'")
