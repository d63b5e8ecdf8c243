"""Ctrl-C reaches the lab runner's own flow, even under eventlet's
monkey-patching, where Python runs the handler in whatever green thread
is current (a child process each: patching is for the whole process)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

CHILD = textwrap.dedent("""
    import sys
    if sys.argv[1] == "eventlet":
        import eventlet
        eventlet.monkey_patch()
        def busy():
            while True:
                eventlet.sleep(0.001)
                sum(range(5000))
        for _ in range(4):
            eventlet.spawn(busy)
    import subprocess, time
    from nova_rdt.lab import interrupt
    old = interrupt.install() if sys.argv[2] == "installed" else None
    print("ready", flush=True)
    try:
        deadline = time.time() + 20
        while time.time() < deadline:
            subprocess.run(["sleep", "0.1"])
        print("not interrupted", flush=True)
    except KeyboardInterrupt as e:
        print("interrupted:", e, flush=True)
        subprocess.run(["true"])         # the hub still works
        print("cleaned up", flush=True)
    finally:
        if old is not None:
            interrupt.restore(old)
""")


def _run(mode: str, install: str, sig=signal.SIGINT) -> str:
    p = subprocess.Popen([sys.executable, "-c", CHILD, mode, install],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": ROOT})
    try:
        assert p.stdout.readline().strip() == "ready"
        import time
        time.sleep(0.5)
        p.send_signal(sig)
        out, _ = p.communicate(timeout=40)
    finally:
        if p.poll() is None:
            p.kill()
    return out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_under_eventlet_the_main_flow_is_interrupted(sig):
    out = _run("eventlet", "installed", sig)
    assert f"interrupted: signal {int(sig)}" in out and "cleaned up" in out


def test_without_eventlet_too():
    out = _run("plain", "installed")
    assert "interrupted: signal 2" in out

