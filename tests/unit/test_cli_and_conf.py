import os
import subprocess
import sys

from oslo_config import cfg

from nova_rdt import conf as rdt_conf
from nova_rdt.cmd import main as cli
from nova_rdt.resctrl.groups import Resctrl

REPO = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


def test_host_show_without_resctrl_is_a_clear_error(tmp_path, capsys):
    rc = cli.main(["host", "show", "--resctrl-root", str(tmp_path)])
    assert rc == 1          # the host's state, not the command line
    err = capsys.readouterr().err
    assert f"no resctrl filesystem at {tmp_path}" in err
    assert "mount -t resctrl" in err


def test_unknown_profile_is_a_clear_error(capsys):
    assert cli.main(["emulate", "--profile", "xeon-9000", "--", "true"]) == 2
    assert "unknown profile 'xeon-9000'" in capsys.readouterr().err


def test_resctrl_from_conf():
    conf = cfg.ConfigOpts()
    rdt_conf.register_opts(conf)
    conf([], project="nova-rdt")
    conf.set_override("resctrl_root", "/x/resctrl", group="rdt")
    conf.set_override("group_prefix", "site-", group="rdt")
    fs = Resctrl.from_conf(conf)
    assert (fs.root, fs.prefix, fs.lock_timeout) == ("/x/resctrl", "site-",
                                                     30.0)
    assert fs.owns_name("site-pmd") and not fs.owns_name("nova-rdt-pmd")


def test_sample_config_is_generated_from_the_code(tmp_path):
    out = tmp_path / "sample"
    subprocess.run(
        [sys.executable, "-m", "oslo_config.generator", "--config-file",
         os.path.join(REPO, "etc/oslo-config-generator/nova-rdt.conf"),
         "--output-file", str(out)], check=True, cwd=REPO)
    with open(os.path.join(REPO, "etc/nova-rdt.conf.sample")) as f:
        committed = f.read()
    assert out.read_text() == committed, \
        "etc/nova-rdt.conf.sample is stale: run oslo-config-generator " \
        "--config-file etc/oslo-config-generator/nova-rdt.conf"
