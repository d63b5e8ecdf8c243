"""Ctrl-C reaches the lab runner's own flow, even under eventlet's
monkey-patching, where Python runs the handler in whatever green thread
is current, and a second one never cuts the clean-up short (a child
process each: patching is for the whole process)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

CHILD = textwrap.dedent("""
    import sys, time
    mode, wait = sys.argv[1], sys.argv[2]
    if mode == "eventlet":
        import eventlet
        eventlet.monkey_patch()
        if wait == "busy":
            def busy():
                while True:
                    eventlet.sleep(0.001)
                    sum(range(5000))
            for _ in range(4):
                eventlet.spawn(busy)
    import subprocess
    from nova_rdt.lab import interrupt
    old = interrupt.install()
    print("ready", flush=True)
    t0 = time.monotonic()
    try:
        if wait == "idle":
            time.sleep(30)          # the hub has nothing else to do
        else:
            while time.monotonic() - t0 < 30:
                subprocess.run(["sleep", "0.1"])
        print("not interrupted", flush=True)
    except KeyboardInterrupt as e:
        print(f"interrupted after {time.monotonic() - t0:.1f} s: {e}",
              flush=True)
        print("cleaning", flush=True)
        time.sleep(1.5)             # a second signal lands here
        subprocess.run(["true"])    # the hub still works
        print("cleaned up", flush=True)
    finally:
        interrupt.restore(old)
""")


def _run(mode: str, wait: str, sigs=(signal.SIGINT,)) -> str:
    p = subprocess.Popen([sys.executable, "-c", CHILD, mode, wait],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": ROOT})
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        p.send_signal(sigs[0])
        lines = []
        for extra in sigs[1:]:
            while True:
                lines.append(p.stdout.readline())
                if lines[-1].strip() == "cleaning" or not lines[-1]:
                    break
            p.send_signal(extra)
        out, err = p.communicate(timeout=40)
    finally:
        if p.poll() is None:
            p.kill()
    return "".join(lines) + out + err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_under_eventlet_the_main_flow_is_interrupted(sig):
    out = _run("eventlet", "busy", (sig,))
    assert f"s: signal {int(sig)}" in out and "cleaned up" in out


def test_an_idle_hub_delivers_it_at_once():
    # A hub blocked in epoll with nothing due would see the throw only
    # when its wait ends (up to 60 s); the heartbeat bounds that.
    out = _run("eventlet", "idle")
    after = float(out.split("interrupted after ")[1].split(" s")[0])
    assert after < 5, out


def test_a_second_signal_does_not_cut_the_clean_up_short():
    out = _run("eventlet", "busy", (signal.SIGINT, signal.SIGTERM))
    assert "still cleaning up" in out and "cleaned up" in out


def test_without_eventlet_too():
    out = _run("plain", "busy")
    assert "s: signal 2" in out and "cleaned up" in out
