"""The hook shim's markers for domains that arrive paused (an incoming
live migration, a restore): their ``started`` runs in the foreground, so
the decided masks are written before libvirt resumes the vCPUs; every
other start still returns at once.  Run as the shell runs it, with a
stand-in interpreter that records how it was called."""

import os
import subprocess
import time

import pytest

from nova_rdt.hook import install

HOSTILE = ["instance-00000001", "$(touch pwned)", "`id`", "-n",
           "../../etc/passwd", "a b\tc", "é"]


@pytest.fixture
def shim(tmp_path):
    record = tmp_path / "calls"
    python = tmp_path / "python"
    # Records its argv and whether it ran in the foreground: the shim
    # waits for it only then, so the marker file exists once it returns.
    python.write_text("#!/bin/sh\n"
                      f"echo \"$$ $*\" >> '{record}'\n")
    python.chmod(0o755)
    state = tmp_path / "state"
    state.mkdir()
    path = tmp_path / "qemu"
    path.write_text(install.render_shim(python=str(python),
                                        settings="/nonexistent.json",
                                        state_path=str(state)))
    path.chmod(0o755)

    def run(name, op):
        res = subprocess.run([str(path), name, op, "begin", "-"],
                             input="<domain/>", capture_output=True,
                             text=True, timeout=30, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        # Nothing on stdout: for migrate and restore that keeps the XML.
        assert res.stdout == ""
        return res

    def calls():
        # The background job may still be starting.
        for _ in range(50):
            if record.exists():
                break
            time.sleep(0.02)
        return record.read_text().splitlines() if record.exists() else []

    return run, calls, state / "incoming", tmp_path


@pytest.mark.parametrize("name", HOSTILE)
@pytest.mark.parametrize("op", ["migrate", "restore"])
def test_an_arriving_domain_starts_in_the_foreground_once(shim, name, op):
    run, calls, incoming, tmp = shim
    run(name, op)
    assert len(os.listdir(incoming)) == 1
    assert oct(os.stat(incoming).st_mode & 0o777) == "0o700"
    assert calls() == []                 # the op itself runs nothing
    run(name, "started")
    # Foreground: the interpreter ran before the shim returned, and the
    # marker is spent.
    assert len(calls()) == 1 and "started" in calls()[0]
    assert os.listdir(incoming) == []
    assert not (tmp / "pwned").exists()


def test_a_plain_start_is_not_waited_for(shim):
    run, calls, incoming, _ = shim
    run("instance-00000002", "migrate")
    run("instance-00000001", "started")
    # The other domain's marker does not make this start wait.
    assert len(os.listdir(incoming)) == 1


def test_a_release_spends_a_marker_a_failed_migration_left(shim):
    run, _calls, incoming, _ = shim
    run("instance-00000001", "migrate")
    run("instance-00000001", "release")
    assert os.listdir(incoming) == []


def test_a_symlinked_marker_is_never_written_through(shim):
    run, calls, incoming, tmp = shim
    run("vm", "migrate")
    (marker,) = os.listdir(incoming)
    os.unlink(incoming / marker)
    victim = tmp / "victim"
    victim.write_text("keep")
    os.symlink(victim, incoming / marker)
    run("vm", "migrate")
    run("vm", "started")
    assert victim.read_text() == "keep"
    assert os.path.islink(incoming / marker)


def test_without_a_writable_state_dir_the_start_goes_on(shim):
    run, calls, incoming, tmp = shim
    os.rmdir(tmp / "state")
    (tmp / "state").write_text("not a directory")
    run("vm", "migrate")
    run("vm", "started")
    assert len(calls()) == 1


def test_a_host_whose_state_dir_is_not_there_yet_still_waits(shim):
    # A new compute: no domain has started, so no hook made the state
    # path; its first incoming migration must still be waited for.
    run, calls, incoming, tmp = shim
    os.rmdir(tmp / "state")
    run("vm", "migrate")
    assert len(os.listdir(incoming)) == 1
    run("vm", "started")
    assert len(calls()) == 1 and os.listdir(incoming) == []


@pytest.mark.parametrize("name", HOSTILE)
def test_prepare_of_a_nova_rdt_domain_runs_in_the_foreground(tmp_path, name):
    """'prepare' makes room for a PMD sharer before libvirt allocates the
    domain's ways: the shim waits for it, with the XML on its stdin.
    Another domain's 'prepare' runs nothing (outside strict mode)."""
    got = tmp_path / "stdin"
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\ncat > '{got}'\n")
    python.chmod(0o755)
    path = tmp_path / "qemu"
    path.write_text(install.render_shim(python=str(python),
                                        state_path=str(tmp_path)))
    path.chmod(0o755)
    plain = ("<domain><metadata><nova-rdt:instance xmlns:nova-rdt="
             "'http://openstack.org/xmlns/libvirt/nova-rdt/1.0'>"
             "<nova-rdt:pmd-share>false</nova-rdt:pmd-share>"
             "</nova-rdt:instance></metadata></domain>")
    ours = plain.replace(">false<", ">true<")
    for xml, runs in (("<domain/>", False), (plain, False), (ours, True)):
        res = subprocess.run([str(path), name, "prepare", "begin", "-"],
                             input=xml, capture_output=True, text=True,
                             timeout=30, cwd=tmp_path)
        assert res.returncode == 0 and res.stdout == "", res.stderr
        # Written before the shim returned: the foreground.
        assert got.exists() == runs
    assert got.read_text() == ours + "\n"
    assert not (tmp_path / "pwned").exists()
