"""Where the software generator finds its compiled sender."""

from __future__ import annotations

import os
import sys

from nova_rdt.rfc2544.generators import pktgen


def test_env_names_the_binary(tmp_path, monkeypatch):
    exe = tmp_path / "nova-rdt-pktgen"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv(pktgen.ENV, str(exe))
    assert pktgen.find() == (str(exe), "")


def test_env_empty_turns_it_off_and_says_so(monkeypatch):
    monkeypatch.setenv(pktgen.ENV, "")
    path, why = pktgen.find()
    assert path is None and "turned off" in why


def test_env_not_executable_is_explained(tmp_path, monkeypatch):
    monkeypatch.setenv(pktgen.ENV, str(tmp_path / "nope"))
    path, why = pktgen.find()
    assert path is None and "not an executable" in why


def test_without_env_the_venv_bin_then_path(tmp_path, monkeypatch):
    monkeypatch.delenv(pktgen.ENV, raising=False)
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    path, why = pktgen.find()
    assert path is None and "build-native.sh" in why
    (tmp_path / "bin").mkdir()
    exe = tmp_path / "bin" / pktgen.NAME
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert pktgen.find() == (os.path.join(str(tmp_path), "bin",
                                          pktgen.NAME), "")
