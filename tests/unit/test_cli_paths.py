"""Every path option of every ``nova-rdt`` command is made absolute where
it is parsed, so nothing derived from it (the lab's ``[rdt]`` paths,
which Nova refuses when relative; a hook's settings path; a report's
links) depends on the directory a later step runs in."""

from __future__ import annotations

import argparse
import os
import re

import pytest

from nova_rdt import cliargs
from nova_rdt.cmd import common
from nova_rdt.cmd import main as main_mod
from nova_rdt.lab.demo import cli as lab_cli

#: Option names that name a file or directory.  An option matching this
#: must take ``common.path`` (or ``common.program``); a new option that
#: does not is caught here.
PATHISH = re.compile(r"--(.+-)?(root|path|dir|file|out|settings|config"
                     r"|mountpoint|paste|python)$")


def _walk(parser: argparse.ArgumentParser, prefix: tuple[str, ...]):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, (*prefix, name))
        elif action.option_strings:
            yield prefix, parser, action


def _options():
    yield from _walk(main_mod.build_parser(), ())
    yield from _walk(lab_cli.build_parser(), ("lab",))


PATH_OPTIONS = [(cmd, parser, action) for cmd, parser, action in _options()
                if PATHISH.search(action.option_strings[-1])]


def test_the_walk_sees_the_options_that_broke():
    names = {(" ".join(cmd), a.option_strings[-1])
             for cmd, _p, a in PATH_OPTIONS}
    assert ("lab", "--out") in names
    assert ("hook install", "--settings-path") in names
    assert ("rfc2544 run", "--out") in names
    assert len(names) >= 20


@pytest.mark.parametrize(
    "cmd,parser,action", PATH_OPTIONS,
    ids=[f"{' '.join(c)} {a.option_strings[-1]}" for c, _p, a in PATH_OPTIONS])
def test_every_path_option_is_made_absolute(cmd, parser, action, tmp_path,
                                            monkeypatch):
    assert action.type in (cliargs.path, cliargs.program), (
        f"nova-rdt {' '.join(cmd)} {action.option_strings[-1]} takes a "
        f"path: give it type=common.path")
    monkeypatch.chdir(tmp_path)
    rel = os.path.join("some", "where")
    assert action.type(rel) == str(tmp_path / "some" / "where")
    assert action.type(f"./{rel}/") == str(tmp_path / "some" / "where")
    # A default given as a relative string goes through the same type.
    if isinstance(action.default, str):
        assert os.path.isabs(action.type(action.default))


def test_lab_out_default_is_absolute_from_any_directory(tmp_path,
                                                        monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = lab_cli.build_parser().parse_args([])
    assert args.out == str(tmp_path / "nova-rdt-lab-report")
    args = lab_cli.build_parser().parse_args(["--out", "r"])
    assert args.out == str(tmp_path / "r")


def test_a_repeated_config_file_is_absolute_each_time(tmp_path,
                                                      monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = main_mod.build_parser().parse_args(
        ["reconcile", "--config-file", "a.conf", "--config-file", "b.conf"])
    assert args.config_file == [str(tmp_path / "a.conf"),
                                str(tmp_path / "b.conf")]


def test_program_looks_a_bare_name_up_on_path(tmp_path, monkeypatch):
    exe = tmp_path / "bin" / "python9"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(exe.parent))
    assert common.program("python9") == str(exe)
    with pytest.raises(argparse.ArgumentTypeError, match="not found"):
        common.program("no-such-python")


@pytest.mark.parametrize("bad", ["", "a\0b"])
def test_an_empty_or_nul_path_is_refused(bad):
    with pytest.raises(argparse.ArgumentTypeError):
        common.path(bad)
