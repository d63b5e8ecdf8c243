"""The controller's guardian: restores static values when it dies.

Started by the controller with a pipe on stdin that only the controller
writes; EOF means the controller is gone (stopped, crashed, killed with
SIGKILL).  It then restores from the state file, which does nothing if
the controller already did (the file says not running) and refuses
while a controller with that pid still runs.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time

from nova_rdt.controller import state as state_mod
from nova_rdt.resctrl.groups import Resctrl


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="nova-rdt-controller-guardian")
    p.add_argument("--state-file", required=True)
    p.add_argument("--resctrl-root", required=True)
    p.add_argument("--sysfs-cpu-root", required=True)
    p.add_argument("--prefix", required=True)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=(
        "%(asctime)s %(process)d %(levelname)s guardian %(message)s"))
    # The controller's stop signals are not ours: only EOF ends us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while sys.stdin.buffer.read(4096):
        pass
    _wait_for_owner_exit(args.state_file)
    fs = Resctrl(args.resctrl_root, prefix=args.prefix,
                 sysfs_cpu=args.sysfs_cpu_root)
    try:
        done = state_mod.restore(fs, args.state_file)
    except (state_mod.StateError, OSError, ValueError) as e:
        logging.error("cannot restore: %s", e)
        return 1
    if done:
        logging.info("controller gone; restored %s", ", ".join(done))
    return 0


def _wait_for_owner_exit(path: str, limit_s: float = 10.0) -> None:
    """EOF comes when the kernel closes the dying controller's files,
    which is before it stops being listed as running; restoring at once
    would see it "alive" and leave its classes as they are."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            state = state_mod.load(path)
        except (state_mod.StateError, OSError, ValueError):
            return          # restore() reports it
        if state is None or not state.owner_alive():
            return
        time.sleep(0.02)


if __name__ == "__main__":
    sys.exit(main())
