"""The emulator's server process: build the model, mount it, serve."""

from __future__ import annotations

import argparse
import sys

from nova_rdt.emulator import fusefs
from nova_rdt.emulator import profiles
from nova_rdt.emulator.kernel import ResctrlKernel


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="nova-rdt-emulator-serve")
    p.add_argument("--profile", default=profiles.DEFAULT_PROFILE)
    p.add_argument("--mountpoint", required=True)
    args = p.parse_args(argv)
    kernel = ResctrlKernel(profiles.get(args.profile))
    fusefs.serve(kernel, args.mountpoint)
    return 0


if __name__ == "__main__":
    sys.exit(main())
