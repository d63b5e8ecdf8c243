"""nova-rdt's errors share one base and keep the builtin bases their
callers catch (nova_rdt.exception, issue 38)."""

from __future__ import annotations

import errno
import json
import pathlib
import subprocess
import sys
import textwrap

import pytest

from nova_rdt import exception
from nova_rdt.resctrl import errors

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Outside the base on purpose (nova_rdt.exception says why).
NOT_UNDER_THE_BASE = {
    "nova_rdt.failpoints.FailpointDied",
    "nova_rdt.hook.main._Timeout",
    "nova_rdt.allocation.placement._GaveUp",
    "nova_rdt.rfc2544.search._Budget",
}


@pytest.fixture(scope="module")
def defined() -> dict[str, dict]:
    """Every exception class a nova_rdt module defines: whether it is a
    NovaRdtError, and its builtin bases.  In a child process: the walk
    imports the labs, and Nova's test tree with them."""
    code = textwrap.dedent("""
        import importlib, inspect, json, pkgutil, sys
        import nova_rdt
        from nova_rdt.exception import NovaRdtError
        out = {}
        for m in pkgutil.walk_packages(nova_rdt.__path__, "nova_rdt."):
            mod = importlib.import_module(m.name)
            for c in vars(mod).values():
                if inspect.isclass(c) and issubclass(c, BaseException) \\
                        and c.__module__ == m.name:
                    out[f"{c.__module__}.{c.__qualname__}"] = {
                        "base": issubclass(c, NovaRdtError),
                        "builtins": sorted(
                            b.__name__ for b in c.__mro__
                            if b.__module__ == "builtins")}
        json.dump(out, sys.stdout)
    """)
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def test_every_error_nova_rdt_defines_derives_from_the_one_base(defined):
    outside = {name for name, c in defined.items() if not c["base"]}
    assert outside == NOT_UNDER_THE_BASE
    # Enough was walked for the answer to mean something.
    assert {"nova_rdt.resctrl.errors.OutOfClosids",
            "nova_rdt.lab.procs.LabError",
            "nova_rdt.emulator.state.KernelError"} <= set(defined)


@pytest.mark.parametrize("name, builtin", [
    # Callers catch these by their builtin base.
    ("nova_rdt.allocation.spec.SpecError", "ValueError"),
    ("nova_rdt.host.settings.SettingsError", "ValueError"),
    ("nova_rdt.resctrl.cbm.CbmError", "ValueError"),
    ("nova_rdt.resctrl.schemata.SchemataSyntaxError", "ValueError"),
    ("nova_rdt.cmd.common.CliError", "ValueError"),
    ("nova_rdt.cmd.common.Failure", "RuntimeError"),
    ("nova_rdt.host.context.IsolationError", "RuntimeError"),
    ("nova_rdt.failpoints.FailpointError", "RuntimeError"),
    ("nova_rdt.lab.libvirtd.VirshError", "RuntimeError"),
    ("nova_rdt.privsep.resctrl.Refused", "PermissionError"),
    ("nova_rdt.failpoints.FailpointDied", "BaseException"),
])
def test_each_keeps_the_builtin_base_its_callers_catch(defined, name,
                                                       builtin):
    assert builtin in defined[name]["builtins"]


def test_a_failpoint_death_is_no_exception_anything_recovers_from(defined):
    assert "Exception" not in \
        defined["nova_rdt.failpoints.FailpointDied"]["builtins"]


def test_the_message_is_given_or_made_from_the_format():
    class Gone(exception.NovaRdtError):
        msg_fmt = "group %(group)s is gone: %(why)s"

    e = Gone(group="g1", why="unmounted")
    assert str(e) == "group g1 is gone: unmounted"
    assert e.kwargs == {"group": "g1", "why": "unmounted"}
    assert str(Gone("said whole")) == "said whole"
    # A wrong keyword still says what it can, never a KeyError.
    assert str(Gone(grp="g1")) == \
        "group %(group)s is gone: %(why)s {'grp': 'g1'}"


def test_a_resctrl_error_keeps_errno_path_and_the_kernels_words():
    e = errors.OutOfClosids("mkdir g1", errno=errno.ENOSPC, path="/r/g1",
                            status="Out of CLOSIDs")
    assert isinstance(e, exception.NovaRdtError)
    assert (e.errno, e.path, e.status) == (errno.ENOSPC, "/r/g1",
                                           "Out of CLOSIDs")
    assert str(e) == ("mkdir g1 (path=/r/g1, errno=ENOSPC, kernel said: "
                      "'Out of CLOSIDs')")
    assert e.kwargs == {}


def test_privseps_refusal_is_still_an_oserror_with_errno_and_path():
    from nova_rdt.privsep import resctrl as privsep_resctrl

    e = privsep_resctrl.Refused("/r/tasks", "not ours")
    assert isinstance(e, PermissionError)
    assert isinstance(e, exception.NovaRdtError)
    assert (e.errno, e.filename) == (errno.EPERM, "/r/tasks")
    assert e.strerror == "nova-rdt privsep refused: not ours"
    # OSError's constructor ran, not the base's: no keywords to keep.
    assert e.kwargs == {}
    with pytest.raises(OSError):
        raise e
