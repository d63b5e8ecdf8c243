"""Entry point of the libvirt hook: ``python -m nova_rdt.hook.main``.

The ``libvirt_hooks/qemu`` shim execs this with ``--settings FILE`` and
libvirt's arguments; the domain XML is on stdin.  It must never call the
libvirt API (libvirtd holds the domain's lock while hooks run), must
finish within ``hook_timeout``, and by default must never make a domain
start fail: it logs and exits 0.  In strict mode (``hook_strict``) a
failure to isolate a managed domain exits 1, which makes libvirt abort
the start (on ``prepare``) or report the error.
"""

from __future__ import annotations

import logging
import signal
import sys
import warnings

EXIT_OK = 0
EXIT_FAIL = 1
LOG = logging.getLogger("nova_rdt.hook")


class _Timeout(Exception):
    pass


def _setup_logging(log_file: str | None) -> None:
    handler: logging.Handler
    try:
        handler = (logging.FileHandler(log_file) if log_file
                   else logging.StreamHandler(sys.stderr))
    except OSError:
        handler = logging.StreamHandler(sys.stderr)
    # The same shape as oslo.log's default line, so operators grep alike.
    handler.setFormatter(logging.Formatter(
        "%(asctime)s.%(msecs)03d %(process)d %(levelname)s %(name)s "
        "%(message)s", "%Y-%m-%d %H:%M:%S"))
    root = logging.getLogger("nova_rdt")
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)


def run(argv: list[str], stdin: bytes) -> int:
    from nova_rdt.host.settings import HookSettings

    settings_path = None
    if argv[:1] == ["--settings"] and len(argv) >= 2:
        settings_path, argv = argv[1], argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    try:
        settings = (HookSettings.load(settings_path) if settings_path
                    else HookSettings())
    except (OSError, ValueError, TypeError) as e:
        _setup_logging(None)
        LOG.error("nova-rdt hook: unusable settings %s: %s",
                  settings_path, e)
        return EXIT_OK
    _setup_logging(settings.log_file)
    strict = settings.hook_strict
    fail = EXIT_FAIL if strict else EXIT_OK

    def alarm(_sig, _frame):
        raise _Timeout

    signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, settings.hook_timeout)
    what = (f"{_show(argv[1]) if len(argv) > 1 else '?'} of "
            f"{_show(argv[0])}" if argv else "call without arguments")
    try:
        return _handle(argv, stdin, settings, what, fail)
    except _Timeout:
        LOG.error("nova-rdt hook: %s took longer than hook_timeout=%ss",
                  what, settings.hook_timeout)
        return fail
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _handle(argv, stdin, settings, what: str, fail: int) -> int:
    from nova_rdt.hook import hookinput

    try:
        event = hookinput.parse(argv, stdin)
    except _Timeout:
        raise
    except Exception as e:      # hostile input: one line, no traceback
        # HookInputError is the expected case; anything else the input
        # provoked is refused the same way, never a traceback.
        LOG.error("nova-rdt hook: refused input (%s): %s", what,
                  _reason(e))
        return fail
    if event is None or event.managed is None:
        return EXIT_OK
    from nova_rdt.host.agent import Agent

    try:
        Agent(settings).handle(event)
    except _Timeout:
        raise
    except Exception as e:      # the domain start goes on
        LOG.error("nova-rdt hook: %s of %s (%s): isolation not "
                  "applied: %s", event.operation, event.name,
                  event.uuid, _reason(e))
        return fail
    return EXIT_OK


def _reason(e: BaseException) -> str:
    text = str(e)
    if not text or type(e).__name__ not in ("HookInputError",
                                            "IsolationError"):
        text = f"{type(e).__name__}: {text}"
    return text[:500]


def _show(arg: str) -> str:
    """An argument quoted for the log, cut: names are not trusted."""
    text = repr(arg)
    return text if len(text) <= 80 else text[:77] + "..."


def main() -> int:
    # Libraries' warnings (eventlet's deprecation notice, through the ovs
    # package ovsdbapp uses, is a plain Warning) would land in libvirtd's
    # log on every start: they are for developers, not for the operator
    # reading that log.  The hook's own problems are logged.
    warnings.simplefilter("ignore")
    data = sys.stdin.buffer.read(4 * 1024 * 1024 + 1)
    return run(sys.argv[1:], data)


if __name__ == "__main__":
    sys.exit(main())
