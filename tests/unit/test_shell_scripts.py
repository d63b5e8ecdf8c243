"""shellcheck over every shell script in the repository, found by what
the files are (a shell shebang, a ``.sh`` name, a ``shellcheck shell=``
directive), not by a list that a new script can miss; and the hook shim
that ``nova-rdt hook install`` writes, as it writes it."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SHEBANGS = ("#!/bin/sh", "#!/bin/bash", "#!/usr/bin/env bash",
            "#!/usr/bin/env sh")


def shell_scripts() -> list[str]:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO,
                           capture_output=True, check=True
                           ).stdout.decode().split("\0")
    found = []
    for rel in filter(None, files):
        path = os.path.join(REPO, rel)
        if not os.path.isfile(path):
            continue                    # deleted in the work tree
        try:
            with open(path, encoding="utf-8") as f:
                head = f.read(400)
        except (UnicodeDecodeError, OSError):
            continue
        first = head.split("\n", 1)[0]
        if rel.endswith(".sh") or first.startswith(SHEBANGS) \
                or "# shellcheck shell=" in head:
            found.append(rel)
    return sorted(found)


def test_every_shell_script_is_found():
    """The discovery itself: it must see the scripts the README and CI
    run, and the hook, or the check below proves nothing."""
    found = set(shell_scripts())
    for rel in ("tools/setup-host.sh", "tools/run-demo.sh",
                "tools/run-tests.sh", "tools/build-native.sh",
                "tools/build-guest-image.sh", ".ci/run",
                "libvirt_hooks/qemu", "devstack/plugin.sh",
                "devstack/settings"):
        assert rel in found, rel


def test_shellcheck_is_clean(tmp_path):
    if shutil.which("shellcheck") is None:
        pytest.skip("no shellcheck (apt-get install shellcheck; "
                    "tools/setup-host.sh installs it)")
    from nova_rdt.hook import install

    shim = tmp_path / "qemu-shim"
    shim.write_text(install.render_shim())
    res = subprocess.run(["shellcheck", "-x", *shell_scripts(), str(shim)],
                         cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
