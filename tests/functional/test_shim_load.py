"""The driver loads however Nova is installed.

devstack installs Nova from a source tree that comes first on sys.path;
the shim pip placed in site-packages is then invisible, because ``nova``
is a regular package.  Here a "source tree" is a symlink farm of the
installed Nova with real ``nova/`` and ``nova/virt/`` directories and no
``rdt`` in it; Nova's own ``load_compute_driver`` must fail there until
``nova-rdt install-shim`` has written the shim into it, and work after.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from nova_rdt.cmd import install_shim

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

nova = pytest.importorskip("nova", reason="Nova is not installed "
                           "(pip install nova-rdt[nova])")

# Nova-compute's start in miniature: Nova's own loader with the driver's
# name, under fakelibvirt (no libvirt-python here).  The last line is
# what the test reads.
LOAD = r"""
import json, sys
import nova.tests.fixtures.libvirt as fakelibvirt
sys.modules["libvirt"] = fakelibvirt
from nova import config
config.parse_args([], default_config_files=[])
from nova.virt import driver, fake
import nova, nova.virt
try:
    drv = driver.load_compute_driver(fake.FakeVirtAPI(),
                                     "rdt.LibvirtRDTDriver")
except SystemExit as e:
    print(json.dumps({"loaded": False, "nova": nova.__file__}))
    sys.exit(0)
print(json.dumps({
    "loaded": True, "class": type(drv).__module__ + "." +
    type(drv).__name__, "nova": nova.__file__,
    "shim": sys.modules["nova.virt.rdt"].__file__,
    "libvirt": isinstance(drv, __import__(
        "nova.virt.libvirt.driver").virt.libvirt.driver.LibvirtDriver)}))
"""


def _farm(src, dst, keep_real):
    """Mirror ``src`` in ``dst``: symlinks, except directories on the way
    to ``keep_real`` (relative paths), which are real and mirrored too."""
    os.makedirs(dst)
    for name in os.listdir(src):
        if name == "__pycache__":
            continue
        s, d = os.path.join(src, name), os.path.join(dst, name)
        inner = [k.split("/", 1)[1] for k in keep_real
                 if k.split("/", 1)[0] == name and "/" in k]
        if name in [k.split("/", 1)[0] for k in keep_real]:
            _farm(s, d, inner)
        else:
            os.symlink(s, d)


@pytest.fixture
def source_tree(tmp_path):
    installed = os.path.dirname(nova.__file__)
    tree = tmp_path / "src"
    _farm(installed, str(tree / "nova"), ["virt/x"])
    rdt = tree / "nova" / "virt" / "rdt"
    if rdt.is_symlink():
        rdt.unlink()              # pip's shim is not in a source tree
    return tree


def _env(tree):
    return {**os.environ, "PYTHONPATH": f"{tree}:{REPO}",
            "PYTHONDONTWRITEBYTECODE": "1"}


def _load(tree):
    import json
    res = subprocess.run([sys.executable, "-c", LOAD], env=_env(tree),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def _shim(tree, *args):
    return subprocess.run(
        [sys.executable, "-m", "nova_rdt.cmd.main", "install-shim", *args],
        env=_env(tree), capture_output=True, text=True, timeout=300)


def test_the_shim_shipped_is_the_one_install_shim_writes():
    with open(os.path.join(REPO, "nova", "virt", "rdt", "__init__.py")) as f:
        assert f.read() == install_shim.SHIM


def test_load_compute_driver_from_a_source_tree_first_on_sys_path(
        source_tree):
    virt = source_tree / "nova" / "virt"
    before = _load(source_tree)
    # The breakage, reproduced: Nova comes from the tree, and the
    # site-packages shim is not seen.
    assert before == {"loaded": False,
                      "nova": str(source_tree / "nova" / "__init__.py")}

    res = _shim(source_tree, "--python", sys.executable)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"{virt}/rdt/__init__.py: installed"
    after = _load(source_tree)
    assert after == {
        "loaded": True, "class": "nova_rdt.virt.driver.LibvirtRDTDriver",
        "nova": str(source_tree / "nova" / "__init__.py"),
        "shim": str(virt / "rdt" / "__init__.py"), "libvirt": True}

    # Idempotent, then gone with --uninstall (twice is fine too).
    res = _shim(source_tree, "--python", sys.executable)
    assert res.stdout.strip().endswith(": unchanged"), res.stderr
    for outcome in ("removed", "absent"):
        res = _shim(source_tree, "--virt-dir", str(virt), "--uninstall")
        assert res.returncode == 0 and res.stdout.strip().endswith(
            f": {outcome}"), res.stdout + res.stderr
    assert not (virt / "rdt").exists()
    assert _load(source_tree)["loaded"] is False


def test_someone_elses_rdt_package_is_left_alone(tmp_path):
    virt = tmp_path / "virt"
    (virt / "rdt").mkdir(parents=True)
    (virt / "rdt" / "__init__.py").write_text("# not ours\n")
    for args in ([], ["--uninstall"]):
        res = subprocess.run(
            [sys.executable, "-m", "nova_rdt.cmd.main", "install-shim",
             "--virt-dir", str(virt), *args],
            cwd=REPO, capture_output=True, text=True, timeout=120)
        assert res.returncode == 2
        assert "is not nova-rdt's shim" in res.stderr
        assert "Traceback" not in res.stderr
    assert (virt / "rdt" / "__init__.py").read_text() == "# not ours\n"


def test_a_python_without_nova_is_a_clear_error(tmp_path):
    res = subprocess.run(
        [sys.executable, "-m", "nova_rdt.cmd.main", "install-shim",
         "--python", "/usr/bin/python3"],
        cwd=REPO, env={"PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=120)
    if res.returncode == 0:
        pytest.skip("/usr/bin/python3 imports nova here")
    assert res.returncode == 2
    assert "--python /usr/bin/python3: cannot" in res.stderr
    assert "Traceback" not in res.stderr
    res = subprocess.run(
        [sys.executable, "-m", "nova_rdt.cmd.main", "install-shim",
         "--python", str(tmp_path / "nope")],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "cannot run it" in res.stderr


# -- init_host without RDT: whatever the probe raises -------------------

@pytest.mark.parametrize("require", [False, True])
def test_init_host_under_novas_sysfs_poison(require, caplog):
    """Nova's SysFsPoisonFixture makes any /sys access raise a bare
    Exception; with the default resctrl_root that is what probing
    resctrl meets in Nova's own functional tests."""
    from nova import exception
    from nova.tests import fixtures as nova_fixtures
    from oslo_config import cfg

    from nova_rdt.virt import rdt_compute

    conf = cfg.CONF
    conf.set_override("require_resctrl", require, group="rdt")
    conf.set_override("resctrl_root", "/sys/fs/resctrl", group="rdt")
    poison = nova_fixtures.SysFsPoisonFixture()
    poison.setUp()
    try:
        rdt = rdt_compute.RdtCompute(host=None)
        with caplog.at_level(logging.WARNING, logger="nova_rdt"):
            if require:
                with pytest.raises(exception.InvalidConfiguration,
                                   match="require_resctrl=False"):
                    rdt.init_host()
            else:
                assert rdt.init_host() is None
    finally:
        poison.cleanUp()
        conf.clear_override("require_resctrl", group="rdt")
        conf.clear_override("resctrl_root", group="rdt")
    if not require:
        warnings = [r for r in caplog.records
                    if r.levelno >= logging.WARNING and
                    r.name.startswith("nova_rdt")]
        assert len(warnings) == 1, [r.getMessage() for r in warnings]
        assert "no RDT" in warnings[0].getMessage()
        assert rdt.fs is None
