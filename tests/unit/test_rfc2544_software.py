"""The software generator's arguments, and the CPUs it keeps off."""

from __future__ import annotations

import os

import pytest

from nova_rdt.rfc2544.generators import software
from nova_rdt.rfc2544.generators.software import SoftwareGenerator


def _argv(gen, monkeypatch):
    seen = {}

    class Done(Exception):
        pass

    def run(argv, **_kw):
        seen["argv"] = argv
        raise Done

    monkeypatch.setattr(software.subprocess, "run", run)
    with pytest.raises(Done):
        gen.trial(64, 1000, 0.1)
    return seen["argv"]


@pytest.mark.parametrize("cpus", [[], "0,1", [-1], [0.5], [True], 3,
                                  [0, "a"]])
def test_bad_cpus_are_refused_by_name(cpus):
    with pytest.raises(ValueError, match="cpus"):
        SoftwareGenerator("a", "b", cpus=cpus)


@pytest.mark.parametrize("threads", [-1, 17, 1.5, True, "2"])
def test_bad_threads_are_refused_by_name(threads):
    with pytest.raises(ValueError, match="threads"):
        SoftwareGenerator("a", "b", threads=threads)


def test_cpus_and_threads_reach_the_worker(monkeypatch):
    argv = _argv(SoftwareGenerator("a", "b", netns="ns", cpus={3, 1},
                                   threads=2), monkeypatch)
    assert argv[:4] == ["ip", "netns", "exec", "ns"]
    assert argv[argv.index("--cpus") + 1] == "1,3"
    assert argv[argv.index("--threads") + 1] == "2"
    argv = _argv(SoftwareGenerator("a", "b"), monkeypatch)
    assert "--cpus" not in argv and "--threads" not in argv


def test_cpus_beside_keeps_off_the_busy_ones(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 5})
    assert software.cpus_beside(0b10) == [0, 2, 5]
    assert software.cpus_beside(0) == [0, 1, 2, 5]
    # Nothing left: unpinned rather than nowhere.
    assert software.cpus_beside(0b100111) is None
