"""Issue 16, settings and the CLI: one validation pass, one-line errors.

``hook install``, ``reconcile``, the hook and the driver all build a
HookSettings, which refuses what any of them would refuse; the CLI
answers every bad input with exit 2 and one line naming it.
"""

from __future__ import annotations

import json
import math

from oslo_config import cfg
import pytest

from nova_rdt import conf as conf_mod
from nova_rdt.cmd import main as cli
from nova_rdt.host.settings import HookSettings
from nova_rdt.host.settings import SettingsError
from nova_rdt.resctrl import capabilities
from tests.kernel_fixtures import make_kernel
from tests.kernel_fixtures import materialize


@pytest.mark.parametrize("field,value,why", [
    ("hook_timeout", math.nan, "hook_timeout = nan: must be a finite"),
    ("hook_timeout", math.inf, "hook_timeout = inf"),
    ("lock_timeout", math.nan, "lock_timeout = nan"),
    ("lock_timeout", -math.inf, "lock_timeout"),
    ("hook_timeout", 1e300, "0.5-3600"),
    ("hook_timeout", "10", "hook_timeout = '10'"),
    ("hook_timeout", True, "hook_timeout = True"),
    ("classes", ("nonsense",), "class 'nonsense'"),
    ("classes", ("a:l3_ways=0",), "l3_ways must be a positive integer"),
    ("classes", ("a:l3_ways=²",), "use ASCII"),
    ("classes", ("a:l3_ways=99",), "l3_ways=99 is above 64"),
    ("classes", ("a:l3_ways=1", "a:l3_ways=2"), "defined twice"),
    ("classes", "a:l3_ways=1", "must be a list"),
    ("reserved_host_ways", 99, "reserved_host_ways = 99"),
    ("reserved_host_ways", 0, "reserved_host_ways = 0"),
    ("reserved_host_ways", "2", "reserved_host_ways = '2'"),
    ("pmd_shared_ways", -1, "pmd_shared_ways = -1"),
    ("group_prefix", "a/b", "group_prefix = 'a/b'"),
    ("group_prefix", "qemu-", "claim libvirt's groups"),
    ("group_prefix", "q", "claim libvirt's groups"),
    ("group_prefix", "nova-rdt-\n", "not a group prefix"),
    ("state_path", "relative", "state_path = 'relative'"),
    ("resctrl_root", "/x\x00y", "resctrl_root"),
    ("pmd_cos", "yes", "pmd_cos = 'yes'"),
    ("log_file", 5, "log_file = 5"),
])
def test_settings_refuse_with_the_option_named(field, value, why):
    with pytest.raises(SettingsError) as e:
        HookSettings(**{field: value})
    assert why in str(e.value)


def test_ways_that_leave_nothing_are_refused():
    with pytest.raises(SettingsError, match="leave no ways"):
        HookSettings(reserved_host_ways=32, pmd_shared_ways=32)


def test_the_json_the_hook_reads_is_validated_alike(tmp_path):
    for data, why in [({"hook_timeout": "nan"}, "hook_timeout"),
                      ({"classes": ["nonsense"]}, "nonsense"),
                      ({"group_prefix": "qemu-"}, "libvirt"),
                      ([1], "JSON object"), ({"x": 1}, "unknown settings")]:
        p = tmp_path / "hook.json"
        p.write_text(json.dumps(data))
        with pytest.raises(SettingsError) as e:
            HookSettings.load(str(p))
        assert str(p) in str(e.value) and why in str(e.value)
    p.write_text("[" * 100000)
    with pytest.raises(SettingsError, match="not JSON"):
        HookSettings.load(str(p))


def test_check_host_refuses_what_this_host_cannot_give(tmp_path):
    k, _, _ = make_kernel("gold-6252")          # 11 ways
    root = materialize(k, str(tmp_path / "resctrl"))
    from nova_rdt.emulator import topology
    cpu = topology.write_tree(k.profile, str(tmp_path / "cpu"))
    caps = capabilities.discover(root, cpu)
    HookSettings(classes=("lp:l3_ways=2",)).check_host(caps)
    with pytest.raises(SettingsError, match="reserved_host_ways=12"):
        HookSettings(reserved_host_ways=12).check_host(caps)
    with pytest.raises(SettingsError, match="l3_ways=10 is more"):
        HookSettings(classes=("lp:l3_ways=10",)).check_host(caps)


# -- oslo options: finite floats ---------------------------------------

@pytest.mark.parametrize("group,name", [
    ("rdt", "lock_timeout"), ("rdt", "hook_timeout"),
    ("rdt_exporter", "notify_interval"), ("rdt_exporter", "capabilities_ttl"),
    ("rdt_exporter", "client_timeout")])
@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e400"])
def test_every_time_option_is_finite(tmp_path, group, name, value):
    p = tmp_path / "x.conf"
    p.write_text(f"[{group}]\n{name} = {value}\n")
    conf = cfg.ConfigOpts()
    conf_mod.register_opts(conf)
    conf([], default_config_files=[str(p)])
    with pytest.raises(cfg.ConfigFileValueError):
        getattr(conf[group], name)


def test_exporter_listens_on_localhost_by_default():
    conf = cfg.ConfigOpts()
    conf_mod.register_opts(conf)
    conf([], default_config_files=[])
    assert conf.rdt_exporter.listen_address == "127.0.0.1"


# -- the CLI: exit 2, one line, never a traceback ----------------------

def _run(capsys, *argv):
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _conf(tmp_path, text, name="nova-rdt.conf"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize("text,why", [
    ("[rdt\nx = 1\n", "not a valid ini file"),
    ("[rdt]\nreserved_host_ways = x\n",
     ":2: [rdt] reserved_host_ways = 'x': not an integer value"),
    ("[rdt]\nreserved_host_ways = 99\n", "reserved_host_ways = '99'"),
    ("[rdt]\nhook_timeout = nan\n", "hook_timeout = 'nan'"),
    ("[rdt]\nlock_timeout = inf\n", "lock_timeout = 'inf'"),
    ("[rdt]\nreserved_host_way = 3\n", "unknown option [rdt] "
                                       "reserved_host_way; known:"),
    ("[rdt_exporter]\nport = 99999\n", "[rdt_exporter] port"),
    ("[rdt]\nclasses = nonsense\n", "class 'nonsense'"),
    ("[rdt]\nclasses = a:l3_ways=0\n", "l3_ways must be"),
    ("[rdt]\ngroup_prefix = a/b\n", "group_prefix = 'a/b'"),
    ("[rdt]\ngroup_prefix = qemu-\n", "libvirt"),
])
@pytest.mark.parametrize("command", [["hook", "install"], ["reconcile"],
                                     ["pmd", "sync"]])
def test_bad_config_is_one_line_exit_2(tmp_path, capsys, command, text,
                                       why):
    path = _conf(tmp_path, text)
    rc, out, err = _run(capsys, *command, "--config-file", path,
                        *(["--hooks-dir", str(tmp_path / "hooks"),
                           "--settings-path", str(tmp_path / "s.json")]
                          if command[0] == "hook" else []))
    assert rc == 2, (out, err)
    assert err.count("\n") == 1 and err.startswith("nova-rdt: "), err
    assert why in err
    assert "Traceback" not in err
    assert not (tmp_path / "hooks").exists()


def test_missing_config_file(tmp_path, capsys):
    rc, _out, err = _run(capsys, "reconcile", "--config-file",
                         str(tmp_path / "nope.conf"))
    assert rc == 2 and "nope.conf: no such file" in err


@pytest.mark.parametrize("data,why", [
    ('{"hook_timeout": "10"}', "hook_timeout = '10'"),
    ('{"classes": "a:l3_ways=1"}', "classes"),
    ("[1, 2]", "JSON object"), ("{", "not JSON"),
    ('{"reserved_host_ways": 2.5}', "reserved_host_ways"),
])
def test_wrong_json_types_are_one_line(tmp_path, capsys, data, why):
    p = tmp_path / "hook.json"
    p.write_text(data)
    rc, _out, err = _run(capsys, "reconcile", "--settings", str(p))
    assert rc == 2 and why in err and err.count("\n") == 1, err


@pytest.mark.parametrize("argv,why", [
    (["exporter", "--port", "abc"], "argument --port: 'abc' is not a port"),
    (["exporter", "--port", "70000"], "argument --port"),
    (["exporter", "--notify-interval", "nan"],
     "argument --notify-interval: 'nan'"),
    (["exporter", "--client-timeout", "inf"], "argument --client-timeout"),
    (["emulate", "--kernel", "banana", "--list-profiles"], None),
])
def test_bad_flags_name_the_flag(capsys, argv, why):
    try:
        rc = cli.main(argv)
    except SystemExit as e:
        rc = e.code
    _out, err = capsys.readouterr()
    if why is None:        # --list-profiles answers before --kernel is read
        assert rc == 0
        return
    assert rc == 2 and why in err and err.count("\n") == 1, err


def test_bad_kernel_version_names_the_flag(capsys, tmp_path):
    rc = cli.main(["emulate", "--kernel", "banana", "--mountpoint",
                   str(tmp_path / "m")])
    _out, err = capsys.readouterr()
    assert rc == 2 and err.startswith("nova-rdt: --kernel: "), err


def test_install_refuses_what_reconcile_refuses_on_this_host(tmp_path,
                                                             capsys):
    k, _, _ = make_kernel("gold-6252")
    root = materialize(k, str(tmp_path / "resctrl"))
    from nova_rdt.emulator import topology
    cpu = topology.write_tree(k.profile, str(tmp_path / "cpu"))
    path = _conf(tmp_path, f"[rdt]\nresctrl_root = {root}\n"
                           f"sysfs_cpu_root = {cpu}\n"
                           f"reserved_host_ways = 12\n")
    rc, _out, err = _run(capsys, "hook", "install", "--config-file", path,
                         "--hooks-dir", str(tmp_path / "hooks"),
                         "--settings-path", str(tmp_path / "s.json"))
    assert rc == 2 and "reserved_host_ways=12" in err, err
    assert not (tmp_path / "s.json").exists()
