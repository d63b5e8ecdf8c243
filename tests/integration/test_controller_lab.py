"""The runtime controller on the Host lab: real libvirtd, the installed
hook, emulated resctrl whose MBM follows real CPU time.

A class ``batch`` (two ways, MB unthrottled) with a member VM started by
libvirt (the hook puts its QEMU threads in the class group), a protected
VM with its own ways (libvirt's group), and ``nova-rdt controller`` run
as its command with a one-second period.  A STREAM-like neighbour (a
process copying 32 MiB buffers) joins the class and leaves it.  On this
machine throttling has no effect on the neighbour's speed: what is
checked is what the controller writes, through the real groups, beside
libvirt and the hook.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.integration import hooklab
from tests.integration.conftest import prepared_lab

CLASS = "batch"
GROUP = f"nova-rdt-class-{CLASS}"
PERIOD = 1.0
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
STREAM = ("import sys\n"
          "a = bytearray(32 << 20)\n"
          "print('ready', flush=True)\n"
          "while True:\n"
          "    b = bytes(a)\n")


@pytest.fixture(scope="module")
def lab(libvirt_cache):
    yield from prepared_lab(
        libvirt_cache, reserved_ways=3, profile="gold-6252",
        hook={"reserved_host_ways": 3, "classes": [f"{CLASS}:l3_ways=2"]})


def mb(lab) -> int:
    return hooklab.schemata(lab, GROUP).get("MB", 0)


def wait_for(check, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return time.monotonic()
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout:.1f}s: {what}")


def test_controller_follows_a_noisy_neighbour_and_restores(lab, guests,
                                                           tmp_path):
    for name, kw in (("prot", {"cache_kib": 3328}),
                     ("member", {"rdt_class": CLASS})):
        guests.append(name)
        lab.libvirt.define(hooklab.managed_domain(lab, name, **kw))
        lab.libvirt.start_domain(name)
    hooklab.eventually(lambda: os.path.isdir(
        os.path.join(lab.resctrl_root, GROUP)))
    # The guests have no OS: paused, they neither run nor count, so the
    # neighbour below is the only traffic, whatever TCG would burn.
    for name in ("prot", "member"):
        lab.libvirt.virsh("suspend", name)
    prot_group = hooklab.group_of(lab, "prot")
    static = hooklab.schemata(lab, GROUP)
    untouched = {g: hooklab.schemata(lab, g) for g in ("", prot_group)}
    assert static.get("MB", 0) == 100

    conf = tmp_path / "controller.conf"
    state_file = tmp_path / "controller.json"
    conf.write_text(
        f"[rdt]\nresctrl_root = {lab.resctrl_root}\n"
        f"sysfs_cpu_root = {lab.sysfs_cpu_root}\n"
        f"state_path = {lab.state_path}\n"
        f"[rdt_controller]\npolicy = bandwidth-share\nperiod = {PERIOD}\n"
        f"bandwidth_capacity_mbps = 40\ntarget_utilisation = 0.5\n"
        f"min_interval = 0\nraise_hold = 1\nprotected = prot\n"
        f"state_file = {state_file}\nport = 0\n")
    log = open(tmp_path / "controller.log", "w+")
    ctl = subprocess.Popen(
        [sys.executable, "-m", "nova_rdt.cmd.main", "controller",
         "--config-file", str(conf), "--debug"], cwd=ROOT, stdout=log,
        stderr=subprocess.STDOUT)
    neighbour = None
    ok = False
    try:
        wait_for(lambda: state_file.exists(), 10, "controller state file")
        # Idle class: left at its static values.
        time.sleep(2 * PERIOD)
        assert mb(lab) == 100

        def busy():
            p = subprocess.Popen([sys.executable, "-c", STREAM],
                                 stdout=subprocess.PIPE, text=True)
            assert p.stdout.readline().strip() == "ready"
            hooklab.fs(lab).add_tasks(hooklab.fs(lab).group(GROUP),
                                      [p.pid])
            return p

        neighbour = busy()
        t0 = time.monotonic()
        t1 = wait_for(lambda: mb(lab) < 100, 3 * PERIOD + 1.0,
                      "MB falls within 3 periods of a busy neighbour")
        lowered = mb(lab)
        assert lowered >= 10 and lowered % 10 == 0
        log.seek(0)
        url = re.search(r"metrics at (https?://[^\s;]+)", log.read()).group(1)
        with urllib.request.urlopen(url, timeout=5) as resp:
            metrics = resp.read().decode()
        # prometheus-client sorts the labels (class before host).
        assert re.search(r'nova_rdt_controller_class_mb\{[^}]*class="'
                         + GROUP + r'"[^}]*\} \d+', metrics), metrics
        # prometheus-client sorts the labels.
        assert 'outcome="applied",reason="bandwidth_over_share"' in metrics
        # Idle again: the MB comes back.
        neighbour.kill()
        neighbour.wait()
        wait_for(lambda: mb(lab) == 100, 4 * PERIOD + 1.0,
                 "MB back to static once the neighbour is idle")
        # Busy again, then the controller is killed outright: its
        # guardian puts the static values back.
        neighbour = busy()
        wait_for(lambda: mb(lab) < 100, 3 * PERIOD + 1.0,
                 "MB falls again")
        ctl.send_signal(signal.SIGKILL)
        ctl.wait()
        wait_for(lambda: hooklab.schemata(lab, GROUP) == static, 10,
                 "static values restored after SIGKILL")
        ok = True
    finally:
        if neighbour is not None:
            neighbour.kill()
            neighbour.wait()
        if ctl.poll() is None:
            ctl.kill()
            ctl.wait()
        log.seek(0)
        text = log.read()
        log.close()
        if not ok:
            print(text)
    print(f"MB fell {t1 - t0:.2f}s after the neighbour went busy "
          f"(to {lowered})")
    assert "refused" not in text and "Traceback" not in text, text
    assert "bandwidth_over_share" in text and "bandwidth_under_share" in text
    for g, s in untouched.items():
        assert hooklab.schemata(lab, g) == s, f"{g or 'root'} was changed"
    assert not hooklab.hook_errors(lab)
    # libvirt and the hook still work beside it: the member is still in
    # the class, and a new member joins it.
    guests.append("member2")
    lab.libvirt.define(hooklab.managed_domain(lab, "member2",
                                              rdt_class=CLASS))
    lab.libvirt.start_domain("member2")
    assert hooklab.schemata(lab, GROUP) == static
