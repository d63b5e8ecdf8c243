"""A second cloud run in the same report directory replaces the first
run's Tempest workspace (``tempest init`` refuses a directory that is
not empty)."""

import subprocess
import sys

from nova_rdt.lab.allinone import serve


def test_a_previous_workspace_is_cleared_and_tempest_init_succeeds(tmp_path):
    ws = tmp_path / "cloud" / "tempest"
    tempest = [sys.executable, "-m", "tempest.cmd.main", "init", "--name",
               "nova-rdt-lab", "--workspace-path", str(ws) + ".workspace.yaml",
               str(ws)]
    first = subprocess.run(tempest, capture_output=True, text=True,
                           cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    again = subprocess.run(tempest, capture_output=True, text=True,
                           cwd=tmp_path)
    # What the cloud met on its second run.
    assert again.returncode != 0
    registry = serve.clear_workspace(str(ws))
    assert registry == str(ws) + ".workspace.yaml"
    assert not ws.exists() and not (tmp_path / "cloud" /
                                    "tempest.workspace.yaml").exists()
    third = subprocess.run(tempest, capture_output=True, text=True,
                           cwd=tmp_path)
    assert third.returncode == 0, third.stdout + third.stderr


def test_nothing_to_clear_is_fine(tmp_path):
    assert serve.clear_workspace(str(tmp_path / "none")).endswith(
        "none.workspace.yaml")
