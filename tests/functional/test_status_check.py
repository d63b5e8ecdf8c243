"""``nova-rdt status upgrade check``: with nothing configured, on a host
set up as the devstack plugin sets one up (emulated resctrl, the hook, the
paste filter, the rootwrap filter, a running exporter), and on a compute
that is only a compute (no scheduler filter, no API paste)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
NAMES = ["nova-rdt driver loadable", "RDTFilter enabled", "resctrl mounted",
         "libvirt hook", "API paste filter", "privsep through rootwrap",
         "exporter"]


def _cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "nova_rdt.cmd.main",
                           *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300, **kw)


COMPUTE = [n for n in NAMES
           if n not in ("RDTFilter enabled", "API paste filter")]


def _check(*args, names=NAMES):
    res = _cli("status", "upgrade", "check", "--json", *args)
    assert res.returncode in (0, 1, 2), res.stdout + res.stderr
    out = json.loads(res.stdout)
    assert [c["check"] for c in out["checks"]] == names
    # The exit status is the worst result, as nova-status's.
    assert res.returncode == max(c["result"] for c in out["checks"])
    return {c["check"]: (c["result"], c["details"]) for c in out["checks"]}


def test_nothing_configured(tmp_path):
    conf = tmp_path / "nova.conf"
    conf.write_text("[DEFAULT]\n")
    got = _check("--config-file", str(conf), "--hooks-dir",
                 str(tmp_path / "hooks"), "--settings-path",
                 str(tmp_path / "hook.json"), "--rootwrap-config",
                 str(tmp_path / "rootwrap.conf"))
    assert got["RDTFilter enabled"][0] == 2
    assert got["libvirt hook"][0] == 2
    assert got["privsep through rootwrap"][0] == 2
    assert got["API paste filter"][0] == 1          # not an API node
    assert got["exporter"][0] == 0                   # not configured
    for name, (code, details) in got.items():
        # Every row that is not a success says how to fix it.
        assert (code == 0) != ("Fix: " in details), (name, details)


def test_bad_input_is_one_line():
    # The checks cannot run: oslo.upgradecheck's 255, not 2 (a Failure).
    res = _cli("status", "upgrade", "check", "--config-file", "/nonexist")
    assert res.returncode == 255
    assert res.stderr.strip() == \
        "nova-rdt: --config-file /nonexist: no such file"
    res = _cli("status", "upgrade", "chek")
    assert res.returncode == 2 and "invalid choice: 'chek'" in res.stderr
    res = _cli("status", "upgrade", "check", "--role", "computer")
    assert res.returncode == 2 and "roles are api, scheduler, compute" in \
        res.stderr


def test_roles_choose_the_checks(tmp_path):
    conf = tmp_path / "nova.conf"
    conf.write_text("[DEFAULT]\n")
    common = ["--config-file", str(conf), "--hooks-dir",
              str(tmp_path / "hooks"), "--settings-path",
              str(tmp_path / "hook.json"), "--rootwrap-config",
              str(tmp_path / "rootwrap.conf")]
    res = _cli("status", "upgrade", "check", "--json", "--role",
               "scheduler,api", *common)
    out = json.loads(res.stdout)
    assert out["roles"] == ["api", "scheduler"]
    assert out["roles_from"] == "--role"
    assert out["config_files"] == [str(conf)]
    got = {c["check"]: c["result"] for c in out["checks"]}
    # An API node by its own account has no paste file: a failure now.
    assert got == {"RDTFilter enabled": 2, "API paste filter": 2}
    # A scheduler by its configuration is checked as a scheduler only.
    conf.write_text("[filter_scheduler]\nenabled_filters = RDTFilter\n"
                    "available_filters = nova_rdt.scheduler.filter."
                    "RDTFilter\n")
    res = _cli("status", "upgrade", "check", "--json", *common)
    out = json.loads(res.stdout)
    assert (out["roles"], out["roles_from"]) == (["scheduler"],
                                                 "configuration")
    assert [(c["check"], c["result"]) for c in out["checks"]] == [
        ("RDTFilter enabled", 0)]
    assert res.returncode == 0
    # The table names the roles, the files read go to stderr.
    res = _cli("status", "upgrade", "check", *common)
    assert "upgrade check results (scheduler)" in res.stdout
    assert f"configuration read from {conf}" in res.stderr


FILTER_SECTION = ("\n[filter:rdt_flavor_check]\npaste.filter_factory = "
                  "nova_rdt.api.flavor_check:filter_factory\n")


def _paste_with_filter(nova_paste, out, legacy=True):
    """Nova's api-paste.ini with rdt_flavor_check after keystonecontext in
    the v2.1 pipeline and, with ``legacy``, in the /v2 one."""
    with open(nova_paste) as f:
        text = f.read()
    v21 = "keystonecontext osapi_compute_app_v21"
    v2 = "keystonecontext legacy_v2_compatible"
    assert v21 in text and v2 in text
    text = text.replace(v21, "keystonecontext rdt_flavor_check "
                             "osapi_compute_app_v21")
    if legacy:
        text = text.replace(v2, "keystonecontext rdt_flavor_check "
                                "legacy_v2_compatible")
    with open(out, "w") as f:
        f.write(text + FILTER_SECTION)


def test_a_paste_filter_missing_from_the_v2_pipeline_is_named(tmp_path):
    """nova-api serves /v2/+ (the legacy v2-compatible API) beside
    /v2.1/+: a filter in the v2.1 pipeline only lets flavors set through
    /v2 skip the whole-flavor check.  The check warns, naming the
    composite and its prefix; in both pipelines it passes."""
    nova_paste = os.path.join(sys.prefix, "etc", "nova", "api-paste.ini")
    if not os.path.exists(nova_paste):
        pytest.skip(f"no Nova api-paste.ini at {nova_paste}")
    conf = tmp_path / "nova.conf"
    conf.write_text(f"[wsgi]\napi_paste_config = {tmp_path}/api-paste.ini\n")
    _paste_with_filter(nova_paste, str(tmp_path / "api-paste.ini"),
                       legacy=False)
    got = _check("--config-file", str(conf), names=["API paste filter"])
    code, details = got["API paste filter"]
    assert code == 1, details
    assert "not in [composite:openstack_compute_api_v21_legacy_v2_" \
           "compatible] (served at /v2/+)" in details
    assert "Fix: add rdt_flavor_check after keystonecontext" in details
    _paste_with_filter(nova_paste, str(tmp_path / "api-paste.ini"))
    got = _check("--config-file", str(conf), names=["API paste filter"])
    assert got["API paste filter"][0] == 0, got


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def configured(emulator, tmp_path):
    """A host as the devstack plugin leaves it, on the emulator."""
    yield from _configured(emulator, tmp_path, all_in_one=True)


@pytest.fixture
def configured_compute(emulator, tmp_path):
    """A compute and nothing else, set up as the install guide says: the
    driver, [rdt], rootwrap's filter, the hook; no RDTFilter, no paste."""
    yield from _configured(emulator, tmp_path, all_in_one=False)


def _configured(emulator, tmp_path, all_in_one: bool):
    if os.geteuid() != 0:
        pytest.skip("the rootwrap filter wants a config file under /etc: "
                    "needs root")
    paste = os.path.join(sys.prefix, "etc", "nova", "api-paste.ini")
    if not os.path.exists(paste):
        pytest.skip(f"no Nova api-paste.ini at {paste}")
    etc = tempfile.mkdtemp(prefix="nova-rdt-test-", dir="/etc")
    port = _free_port()
    exporter = None
    try:
        conf = os.path.join(etc, "nova.conf")
        with open(conf, "w") as f:
            f.write(
                "[DEFAULT]\ncompute_driver = rdt.LibvirtRDTDriver\n"
                f"rootwrap_config = {etc}/rootwrap.conf\n")
            if all_in_one:
                f.write(
                    "[wsgi]\napi_paste_config = api-paste.ini\n"
                    "[filter_scheduler]\n"
                    "available_filters = nova.scheduler.filters."
                    "all_filters\n"
                    "available_filters = nova_rdt.scheduler.filter."
                    "RDTFilter\n"
                    "enabled_filters = ComputeFilter,RDTFilter\n")
            f.write(
                f"[rdt]\nresctrl_root = {emulator.mountpoint}\n"
                f"sysfs_cpu_root = {emulator.env()['NOVA_RDT_SYSFS_CPU']}\n"
                f"state_path = {tmp_path}/state\n"
                f"[rdt_exporter]\nport = {port}\n")
        os.makedirs(os.path.join(etc, "rootwrap.d"))
        shutil.copy(os.path.join(REPO, "etc", "nova", "rootwrap.d",
                                 "nova-rdt.filters"),
                    os.path.join(etc, "rootwrap.d"))
        with open(os.path.join(etc, "rootwrap.conf"), "w") as f:
            f.write(f"[DEFAULT]\nfilters_path={etc}/rootwrap.d\n"
                    f"exec_dirs={BIN}\n")
        # Nova's api-paste.ini with the filter in every compute pipeline
        # nova-api serves, as doc/source/nova.rst says.
        if all_in_one:
            _paste_with_filter(paste, os.path.join(etc, "api-paste.ini"))
        hooks, settings = str(tmp_path / "hooks"), str(tmp_path / "h.json")
        res = _cli("hook", "install", "--config-file", conf, "--hooks-dir",
                   hooks, "--settings-path", settings)
        assert res.returncode == 0, res.stderr
        exporter = subprocess.Popen(
            [sys.executable, "-m", "nova_rdt.cmd.main", "exporter",
             "--config-file", conf, "--notify-interval", "0"], cwd=REPO,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                assert exporter.poll() is None, exporter.stderr.read()
                time.sleep(0.2)
        yield {"conf": conf, "hooks": hooks, "settings": settings,
               "etc": etc}
    finally:
        if exporter is not None:
            exporter.terminate()
            exporter.wait(30)
        shutil.rmtree(etc, ignore_errors=True)


def test_a_configured_host_passes(configured):
    args = ["--config-file", configured["conf"], "--hooks-dir",
            configured["hooks"], "--settings-path", configured["settings"]]
    got = _check(*args)
    assert {n: c for n, (c, _d) in got.items()} == dict.fromkeys(NAMES, 0), \
        got
    assert "L3 CAT" in got["resctrl mounted"][1]
    assert "privsep-rootwrap-nova_rdt" in got["privsep through rootwrap"][1]

    # Each part undone is named, with its fix.
    os.unlink(os.path.join(configured["etc"], "rootwrap.d",
                           "nova-rdt.filters"))
    with open(configured["conf"], "a") as f:
        f.write("[rdt]\nreserved_host_ways = 3\n")
    got = _check(*args)
    code, details = got["privsep through rootwrap"]
    assert code == 1 and "catch-all" in details and "Fix: install" in details
    code, details = got["libvirt hook"]
    assert code == 1 and "differ from [rdt]" in details


def test_a_configured_compute_passes_as_a_compute(configured_compute):
    """Issue 31: a compute set up as a compute passes, exit 0, with its
    role given or read from compute_driver; the scheduler's filter and
    the API's paste filter are not its business."""
    c = configured_compute
    args = ["--config-file", c["conf"], "--hooks-dir", c["hooks"],
            "--settings-path", c["settings"]]
    for role in (["--role", "compute"], []):
        res = _cli("status", "upgrade", "check", "--json", *role, *args)
        assert res.returncode == 0, res.stdout + res.stderr
        out = json.loads(res.stdout)
        assert out["roles"] == ["compute"]
        assert out["roles_from"] == ("--role" if role else "configuration")
        assert [(r["check"], r["result"]) for r in out["checks"]] == [
            (n, 0) for n in COMPUTE]
    # The table form exits 0 too, and names the role.
    res = _cli("status", "upgrade", "check", "--role", "compute", *args)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "upgrade check results (compute)" in res.stdout
    # Asked as every role, the same host fails the scheduler's check.
    got = _check("--role", "api,scheduler,compute", *args)
    assert got["RDTFilter enabled"][0] == 2
