"""A real Tempest (installed from PyPI with the ``[tempest]`` extra) in a
private workspace, pointed at a Keystone nothing listens on: no cloud.
Shared by the plugin's and the isolation scenario's tests."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

TEMPEST = os.path.join(os.path.dirname(sys.executable), "tempest")

# Keystone at a port nothing listens on: the plugin's tests must skip on
# their configuration before they ever ask for credentials.
CONF = """[DEFAULT]
log_dir = {ws}/logs
[auth]
use_dynamic_credentials = true
admin_username = admin
admin_password = secret
admin_project_name = admin
admin_domain_name = Default
[identity]
uri_v3 = http://127.0.0.1:9/identity/v3
auth_version = v3
[compute]
image_ref = 00000000-0000-0000-0000-000000000000
flavor_ref = 1
{compute}
[nova_rdt]
{rdt}
{extra}
"""


def tempest(*args, cwd=None, home=None, timeout=240):
    if not os.path.exists(TEMPEST):
        pytest.skip(f"tempest is not installed beside {sys.executable} "
                    f"(pip install nova-rdt[tempest])")
    # tempest init registers workspaces in ~/.tempest: keep that private.
    env = {**os.environ, **({"HOME": str(home)} if home else {})}
    return subprocess.run([TEMPEST, *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, env=env)


def init(home):
    """``tempest init`` of a workspace under ``home``; returns its path."""
    res = tempest("init", str(home / "ws"), home=home)
    assert res.returncode == 0, res.stderr
    return home / "ws"


def configure(ws, rdt: str = "", compute: str = "", extra: str = "") -> None:
    """The workspace's tempest.conf, with ``rdt`` as [nova_rdt],
    ``compute`` added to [compute] and ``extra`` (whole sections) last."""
    (ws / "etc" / "tempest.conf").write_text(CONF.format(
        ws=ws, rdt=rdt, compute=compute, extra=extra))


def run(ws, *args):
    """``tempest <args>`` in the workspace; returns its whole output."""
    res = tempest(*args, cwd=ws, home=ws.parent)
    return res, res.stdout + res.stderr
