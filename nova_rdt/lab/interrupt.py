"""Ctrl-C and SIGTERM for the lab's runners: a KeyboardInterrupt in the
runner's own flow, so that its ``finally`` stops everything it started.

The lab runs Nova in-process, with eventlet's monkey-patching.  Python
runs a signal handler in the OS main thread, in whichever greenlet runs
at that moment: usually eventlet's hub or one of Nova's green threads,
where a KeyboardInterrupt raised by the default handler ends that green
thread and nothing else (seen here: a Ctrl-C during the isolation
scenario's measurement left it running into the next condition).  So
the handler sends the exception to the main greenlet, the one the
runner's code runs in, through the hub, as eventlet itself kills a green
thread (``greenthread.kill``): the primitive it waits in then raises it,
and cleans up its own timers.
"""

from __future__ import annotations

import signal
import sys

SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: How often the hub wakes while installed: the throw is a timer, and a
#: hub blocked in epoll with nothing due would only see it when the wait
#: ends (up to 60 s), so a Ctrl-C in a quiet wait would seem ignored.
HEARTBEAT = 0.2

_state: dict = {"delivered": False, "heartbeat": None}


def _handler(signum, _frame) -> None:
    if _state["delivered"]:
        # Users press Ctrl-C twice, and SIGTERM is often followed by
        # SIGINT: a second interrupt must not cut the clean-up short.
        try:
            sys.stderr.write("interrupted: still cleaning up, please "
                             "wait\n")
        except (OSError, ValueError):
            pass
        return
    _state["delivered"] = True
    exc = KeyboardInterrupt(f"signal {signum}")
    if "eventlet" not in sys.modules:
        raise exc
    from eventlet import hubs
    import greenlet
    current = main = greenlet.getcurrent()
    while main.parent is not None:
        main = main.parent
    if current is main:
        raise exc
    hubs.get_hub().schedule_call_global(0, main.throw, exc)


def _beat() -> None:
    import eventlet
    while True:
        eventlet.sleep(HEARTBEAT)


def install() -> dict:
    """SIGINT and SIGTERM raise KeyboardInterrupt in the caller's flow
    from now on, once; a later one only says the clean-up goes on.
    Returns what :func:`restore` puts back."""
    _state["delivered"] = False
    if "eventlet" in sys.modules and _state["heartbeat"] is None:
        import eventlet
        _state["heartbeat"] = eventlet.spawn(_beat)
    return {s: signal.signal(s, _handler) for s in SIGNALS}


def restore(old: dict) -> None:
    for s, h in old.items():
        signal.signal(s, h)
    beat, _state["heartbeat"] = _state["heartbeat"], None
    if beat is not None:
        beat.kill()
