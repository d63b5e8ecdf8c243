"""User data of the two roles: base64, never None, round-trips."""

import base64
import binascii
import shutil
import subprocess

from hypothesis import given
from hypothesis import strategies as st
import pytest

from nova_rdt.isolation import cloud as cloud_mod
from nova_rdt.isolation import procedure
from nova_rdt.isolation import userdata


def decode(text):
    return base64.b64decode(text, validate=True).decode("utf-8")


@pytest.mark.parametrize("role", cloud_mod.ROLES)
@pytest.mark.parametrize("load", procedure.NOISY_LOADS)
def test_each_role_gets_base64_of_a_shell_script(role, load):
    s = procedure.Settings(noisy_load=load)
    data = userdata.for_role(role, s)
    assert isinstance(data, str) and data
    script = decode(data)
    assert script.startswith("#!/bin/sh\n")
    assert script == userdata.script(role, s)


def test_the_noisy_script_runs_the_chosen_load_sized_as_set():
    s = procedure.Settings(noisy_load="stress-ng", noisy_memory_mb=300)
    script = decode(userdata.for_role(cloud_mod.NOISY, s))
    assert "[ stress-ng = stress-ng ]" in script
    assert "--vm-bytes 300M" in script and "memtester 300M 0" in script
    fwd = decode(userdata.for_role(cloud_mod.FORWARDING, s))
    assert "--forward-mode=io" in fwd and "mirred" in fwd


@pytest.mark.skipif(shutil.which("sh") is None, reason="no /bin/sh")
@pytest.mark.parametrize("role", cloud_mod.ROLES)
def test_the_scripts_parse(role):
    out = subprocess.run(["sh", "-n"], input=userdata.script(
        role, procedure.Settings()), text=True, capture_output=True)
    assert out.returncode == 0, out.stderr


def test_overrides_are_encoded_too():
    s = procedure.Settings(forwarding_user_data="#cloud-config\n{}\n",
                           noisy_user_data="#!/bin/sh\nstress-ng -c 1\n")
    assert decode(userdata.for_role("forwarding", s)) == "#cloud-config\n{}\n"
    assert decode(userdata.for_role("noisy", s)).endswith("-c 1\n")


def test_an_unknown_role_names_the_roles():
    with pytest.raises(ValueError, match="forwarding, noisy"):
        userdata.for_role("router", procedure.Settings())


@given(st.text())
def test_encode_round_trips_any_text(text):
    data = userdata.encode(text)
    assert decode(data) == text
    assert data.isascii() and "\n" not in data


def test_raw_shell_text_is_not_base64():
    # What the old scenario sent: Nova refuses it; encode() does not.
    with pytest.raises(binascii.Error):
        base64.b64decode("#!/bin/sh\nmemtester 512M 0\n", validate=True)


@pytest.mark.parametrize("console,forwarder", [
    ("", "unknown"), (None, "unknown"),
    ("[  3.1] cloud-init ...\nnova-rdt-forwarder: testpmd\n", "testpmd"),
    ("nova-rdt-forwarder: kernel\r\n", "kernel"),
    ("nova-rdt-forwarder: none (needs two dataplane NICs)", "unknown"),
])
def test_forwarder_from_console(console, forwarder):
    assert userdata.forwarder_from_console(console) == forwarder
