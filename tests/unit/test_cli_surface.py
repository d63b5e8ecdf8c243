"""The ``nova-rdt`` command line as a script sees it (issue 31): help on
every option, declared exit codes, ``--version``, ``--json`` wherever a
command reports, Nova's configuration read by default and named, nothing
from libraries on the terminal, and one verb form for the shim."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from nova_rdt.cmd import common
from nova_rdt.cmd import main as cli
from nova_rdt.cmd import reference
from nova_rdt.lab.demo import cli as lab_cli

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
LEAVES = reference.leaves()
# Services and report writers: they answer with a running process or a
# report directory, not with a result on stdout.
NO_JSON = {"exporter", "rfc2544 run", "lab"}


def _run(*argv, **kw):
    return subprocess.run([sys.executable, "-m", "nova_rdt.cmd.main",
                           *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=120, **kw)


def _walk(parser, path=()):
    """Every option and positional of every parser, with its command."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                yield (*path, choice.dest), "(command)", choice
            for name, sub in action.choices.items():
                yield from _walk(sub, (*path, name))
        else:
            yield path, (action.option_strings or [action.dest])[-1], action


ALL = list(_walk(cli.build_parser())) + list(_walk(lab_cli.build_parser(),
                                                   ("lab",)))


def test_the_walk_sees_every_command_and_option():
    names = {(" ".join(c), o) for c, o, _a in ALL}
    for expected in [("hook install", "--settings-path"),
                     ("rfc2544 run", "--no-plots"), ("lab", "--scenario"),
                     ("status upgrade", "--role"), ("shim", "(command)"),
                     ("", "--version")]:
        assert expected in names, expected
    assert len(names) > 100


@pytest.mark.parametrize("cmd,option,action", ALL, ids=[
    f"{' '.join(c)} {o}".strip() for c, o, _a in ALL])
def test_every_option_has_help(cmd, option, action):
    """A hidden placeholder (SUPPRESS) is allowed; silence is not."""
    assert action.help, f"nova-rdt {' '.join(cmd)} {option}: no help text"


@pytest.mark.parametrize("leaf", LEAVES, ids=[leaf.name for leaf in LEAVES])
def test_every_command_declares_its_exit_codes(leaf):
    codes = leaf.exit_codes
    assert {0, 1, 2} <= set(codes), (leaf.name, codes)
    assert all(isinstance(t, str) and t for t in codes.values())
    assert codes[2].startswith("usage") or leaf.name.startswith("status")


def test_json_wherever_a_command_reports():
    with_json = {leaf.name for leaf in LEAVES
                 if any("--json" in a.option_strings for a in leaf.options)}
    assert with_json == {leaf.name for leaf in LEAVES} - NO_JSON


@pytest.mark.parametrize("leaf", [leaf for leaf in LEAVES
                                  if leaf.name != "lab"],
                         ids=[leaf.name for leaf in LEAVES
                              if leaf.name != "lab"])
def test_every_commands_help_says_what_it_does_and_its_exit_codes(leaf):
    """``nova-rdt hook install --help`` opens with what the command does
    and ends with what each exit status means, as the top-level help
    promises ("Each command's --help has its own")."""
    res = _run(*leaf.name.split(), "--help")
    assert res.returncode == 0, res.stderr
    usage, _blank, rest = res.stdout.partition("\n\n")
    assert usage.startswith(f"usage: nova-rdt {leaf.name.split()[0]}")
    assert not rest.startswith(("options:", "positional arguments:")), \
        f"no description: {rest[:200]}"
    tail = res.stdout.split("\nexit status:\n", 1)
    assert len(tail) == 2, res.stdout
    shown = [ln.split()[0] for ln in tail[1].splitlines()
             if ln.startswith("  ") and not ln.startswith("       ")]
    assert shown == [str(c) for c in sorted(
        leaf.exit_codes, key=lambda c: (isinstance(c, str), str(c).zfill(5)))]


def test_json_help_names_config_files_only_where_they_are_read():
    for leaf in LEAVES:
        for a in leaf.options:
            if "--json" not in a.option_strings:
                continue
            reads = any("--config-file" in b.option_strings
                        for b in leaf.options)
            assert ("config_files" in a.help) == reads, (leaf.name, a.help)


@pytest.mark.parametrize("argv", [["hook", "install", "--bogus"],
                                  ["status", "upgrade", "check", "--jsn"],
                                  ["reconcile", "-x"]])
def test_an_unknown_flag_points_at_that_commands_help(argv):
    res = _run(*argv)
    assert res.returncode == 2
    prog = "nova-rdt " + " ".join(a for a in argv[:2]
                                  if not a.startswith("-"))
    assert res.stderr == (f"{prog}: unrecognized arguments: {argv[-1]} "
                          f"(see {prog} --help)\n")


def test_version_is_the_packages():
    from pbr import version

    res = _run("--version")
    assert res.returncode == 0 and res.stderr == ""
    expected = version.VersionInfo("nova-rdt").release_string()
    assert res.stdout == f"nova-rdt {expected}\n"


# -- Nova's configuration, by default and named ----------------------------

COMMANDS = [["hook", "install"], ["pmd", "sync"], ["reconcile"],
            ["exporter"], ["controller"]]


@pytest.fixture
def default_conf(tmp_path, monkeypatch):
    conf = tmp_path / "etc" / "nova.conf"
    confd = tmp_path / "etc" / "nova.conf.d"
    monkeypatch.setattr(common, "DEFAULT_NOVA_CONF", str(conf))
    monkeypatch.setattr(common, "DEFAULT_NOVA_CONF_DIR", str(confd))
    return conf, confd


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_missing_default_nova_conf_is_an_error(default_conf, capsys,
                                                 command):
    conf, _ = default_conf
    rc = cli.main(command)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err == (f"nova-rdt: {conf}: no such file (read when no "
                   "--config-file is given); pass --config-file with the "
                   "nova.conf that holds [rdt]\n")


def test_status_says_255_when_nova_conf_is_missing(default_conf, capsys):
    rc = cli.main(["status", "upgrade", "check"])
    assert rc == 255
    assert "no such file" in capsys.readouterr().err


def _hook_install(tmp_path, *args):
    return cli.main(["hook", "install", "--hooks-dir",
                     str(tmp_path / "hooks"), "--settings-path",
                     str(tmp_path / "hook.json"), *args])


def test_nova_conf_then_conf_d_in_name_order(default_conf, tmp_path,
                                             capsys):
    conf, confd = default_conf
    confd.mkdir(parents=True)
    conf.write_text(f"[rdt]\nreserved_host_ways = 1\nresctrl_root = "
                    f"{tmp_path}/no-resctrl\n")
    (confd / "20-b.conf").write_text("[rdt]\nreserved_host_ways = 3\n")
    (confd / "10-a.conf").write_text("[rdt]\nreserved_host_ways = 2\n"
                                     "pmd_shared_ways = 1\n"
                                     "pmd_cos = true\n")
    (confd / "README").write_text("[rdt]\nreserved_host_ways = 9\n")
    assert _hook_install(tmp_path, "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["config_files"] == [str(conf), str(confd / "10-a.conf"),
                                   str(confd / "20-b.conf")]
    settings = json.loads((tmp_path / "hook.json").read_text())
    assert (settings["reserved_host_ways"],
            settings["pmd_shared_ways"]) == (3, 1)
    # Without --json, the files read are one line on stderr.
    assert _hook_install(tmp_path) == 0
    err = capsys.readouterr().err
    assert err == (f"nova-rdt: configuration read from {conf}, "
                   f"{confd}/10-a.conf, {confd}/20-b.conf\n")


def test_explicit_files_are_all_that_is_read(default_conf, tmp_path,
                                             capsys):
    conf, confd = default_conf
    confd.mkdir(parents=True)
    conf.write_text("[rdt]\nreserved_host_ways = 5\n")
    (confd / "a.conf").write_text("[rdt]\nreserved_host_ways = 6\n")
    mine = tmp_path / "mine.conf"
    mine.write_text(f"[rdt]\nreserved_host_ways = 4\nresctrl_root = "
                    f"{tmp_path}/no-resctrl\n")
    assert _hook_install(tmp_path, "--json", "--config-file",
                         str(mine)) == 0
    assert json.loads(capsys.readouterr().out)["config_files"] == \
        [str(mine)]
    assert json.loads((tmp_path / "hook.json").read_text())[
        "reserved_host_ways"] == 4
    # --no-config-files: nova-rdt's defaults, said so.
    assert _hook_install(tmp_path, "--no-config-files") == 0
    assert "configuration read from no file (defaults and flags)" in \
        capsys.readouterr().err
    assert json.loads((tmp_path / "hook.json").read_text())[
        "reserved_host_ways"] == 2


@pytest.mark.parametrize("args,why", [
    (["--config-dir", "/nonexistent-dir"],
     "--config-dir /nonexistent-dir: no such directory"),
    (["--no-config-files", "--config-dir", "/tmp"],
     "give --no-config-files or --config-dir, not both"),
    (["--settings", "/x.json", "--config-dir", "/tmp"],
     "give --settings or --config-dir, not both"),
])
def test_bad_config_flags_are_usage_errors(tmp_path, capsys, args, why):
    assert _hook_install(tmp_path, *args) == 2
    assert why in capsys.readouterr().err


def test_conflicting_flags_are_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["reconcile", "--config-file", "/a", "--no-config-files"])
    assert e.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_services_name_their_configuration(tmp_path):
    """The exporter's start line names what it read."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "nova_rdt.cmd.main", "exporter",
         "--no-config-files", "--port", "0", "--listen", "127.0.0.1",
         "--resctrl-root", str(tmp_path), "--state-path", str(tmp_path),
         "--host", "h", "--notify-interval", "0"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    try:
        line = proc.stdout.readline()
    finally:
        proc.terminate()
        proc.wait(30)
    assert "configuration read from no file (defaults and flags)" in line


# -- nothing from libraries on the terminal --------------------------------

@pytest.fixture
def snapshot_host(tmp_path):
    """A copied resctrl tree (readable, not writable as the kernel's is)
    and an OVSDB socket that does not exist."""
    from nova_rdt.emulator import topology
    from tests.kernel_fixtures import make_kernel
    from tests.kernel_fixtures import materialize

    k, _, _ = make_kernel("gold-6252")
    root = materialize(k, str(tmp_path / "resctrl"))
    cpu = topology.write_tree(k.profile, str(tmp_path / "cpu"))
    conf = tmp_path / "nova.conf"
    conf.write_text(f"[rdt]\nresctrl_root = {root}\nsysfs_cpu_root = {cpu}\n"
                    f"state_path = {tmp_path}/state\npmd_cos = true\n"
                    f"ovsdb_connection = unix:{tmp_path}/no-db.sock\n")
    return conf


def test_pmd_sync_prints_no_library_warnings(snapshot_host, tmp_path):
    """eventlet's deprecation (ovs imports it) and the OVSDB client's
    retries stay off the terminal; nova-rdt's own warning stays on."""
    res = _run("pmd", "sync", "--config-file", str(snapshot_host))
    lines = res.stderr.splitlines()
    assert lines[0] == f"nova-rdt: configuration read from {snapshot_host}"
    assert lines[1].startswith("nova-rdt: warning: PMD cores unknown, "
                               "keeping nova-rdt-pmd's CPUs: OVSDB at unix:")
    # The copied tree refuses the group's mkdir, as an unwritable
    # resctrl would: one line, exit 1.
    assert lines[2].startswith("nova-rdt: ") and len(lines) == 3, lines
    assert res.returncode == 1
    for noise in ("Eventlet", "eventlet", "Unable to open stream",
                  "Warning:", "Traceback"):
        assert noise not in res.stderr, res.stderr
    # With --log-file, the libraries' records are kept there.
    log = tmp_path / "cli.log"
    res = _run("pmd", "sync", "--config-file", str(snapshot_host),
               "--log-file", str(log))
    assert "Eventlet" not in res.stderr
    text = log.read_text()
    assert "EventletDeprecationWarning" in text
    assert "Unable to open stream" in text
    assert "PMD cores unknown" in text


# -- the shim's verbs ------------------------------------------------------

def test_shim_install_and_the_deprecated_alias(tmp_path):
    virt = tmp_path / "virt"
    virt.mkdir()
    res = _run("shim", "install", "--virt-dir", str(virt), "--json")
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert json.loads(res.stdout) == {
        "shim": str(virt / "rdt" / "__init__.py"), "outcome": "installed"}
    res = _run("install-shim", "--virt-dir", str(virt))
    assert res.returncode == 0
    assert res.stdout.strip().endswith(": unchanged")
    assert res.stderr == (
        "nova-rdt: warning: 'nova-rdt install-shim' is deprecated and will "
        "be removed in the next release: use 'nova-rdt shim install' (and "
        "'nova-rdt shim uninstall' for --uninstall)\n")
    res = _run("shim", "uninstall", "--virt-dir", str(virt))
    assert res.returncode == 0 and res.stdout.strip().endswith(": removed")
    assert not (virt / "rdt").exists()


# -- hook uninstall says what it did ------------------------------------

def test_hook_uninstall_says_what_it_removed_and_what_was_not_there(
        tmp_path):
    hooks, settings = tmp_path / "hooks", tmp_path / "hook.json"
    args = ["--hooks-dir", str(hooks), "--settings-path", str(settings)]
    res = _run("hook", "install", "--no-config-files", *args)
    assert res.returncode == 0, res.stderr
    shim = hooks / "qemu.d" / "nova-rdt"
    res = _run("hook", "uninstall", *args)
    assert res.returncode == 0 and res.stderr == ""
    assert res.stdout == f"removed {shim}\nremoved {settings}\n"
    res = _run("hook", "uninstall", "--json", *args)
    assert res.returncode == 0
    assert json.loads(res.stdout) == {"removed": [],
                                      "absent": [str(shim), str(settings)]}
    res = _run("hook", "uninstall", *args)
    assert "removed" not in res.stdout
    assert f"{shim}: not there, nothing to remove" in res.stdout


# -- the services: their own log, not the libraries' ---------------------

def _service_stderr(tmp_path, argv, ready):
    err = tmp_path / "stderr"
    with open(err, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "nova_rdt.cmd.main",
                                 *argv], cwd=REPO, stdout=subprocess.PIPE,
                                stderr=f, text=True)
    try:
        line = proc.stdout.readline()
        assert ready in line, (line, err.read_text())
    finally:
        proc.terminate()
        proc.wait(30)
    return line, err.read_text()


def test_the_exporter_with_notifications_logs_no_library_noise(tmp_path):
    """Notifications on (the default interval) import oslo.messaging,
    which loads oslo.service's eventlet backend: its INFO records and
    eventlet's deprecation notice stay out of the service's log."""
    _line, err = _service_stderr(tmp_path, [
        "exporter", "--no-config-files", "--port", "0", "--listen",
        "127.0.0.1", "--resctrl-root", str(tmp_path), "--state-path",
        str(tmp_path), "--host", "h"], "metrics at /metrics")
    for noise in ("Eventlet", "eventlet", "oslo_service", "Warning"):
        assert noise not in err, err


def test_the_controller_logs_no_library_noise_and_names_its_host(
        tmp_path):
    from nova_rdt.emulator import mount

    reason = mount.fuse_unavailable_reason()
    if reason:
        pytest.skip(f"FUSE emulator unavailable: {reason}")
    emu = mount.Emulator("gold-6252")
    emu.start()
    try:
        conf = tmp_path / "nova.conf"
        conf.write_text(f"[DEFAULT]\nhost = compute-7\n[rdt]\n"
                        f"resctrl_root = {emu.mountpoint}\n"
                        f"sysfs_cpu_root = {emu.sysfs_cpu}\n"
                        f"state_path = {tmp_path}/state\n"
                        f"[rdt_controller]\nport = 0\n"
                        f"state_file = {tmp_path}/c.json\n")
        line, err = _service_stderr(
            tmp_path, ["controller", "--config-file", str(conf),
                       "--no-guardian"], "metrics at http")
    finally:
        emu.stop()
    assert line.startswith("nova-rdt controller for compute-7: "), line
    for noise in ("Eventlet", "eventlet", "oslo_service", "Warning"):
        assert noise not in err, err


def test_controller_restore_json(tmp_path):
    res = _run("controller", "--no-config-files", "--resctrl-root",
               str(tmp_path), "--state-file", str(tmp_path / "c.json"),
               "--restore", "--json")
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert json.loads(res.stdout) == {
        "restored": [], "state_file": str(tmp_path / "c.json"),
        "config_files": []}
    res = _run("controller", "--no-config-files", "--resctrl-root",
               str(tmp_path), "--json")
    assert res.returncode == 2
    assert "--json goes with --restore" in res.stderr
