"""The emulator's server process: build the model, mount it, serve."""

from __future__ import annotations

import argparse
import sys

from nova_rdt.emulator import fusefs
from nova_rdt.emulator import profiles
from nova_rdt.emulator import versions
from nova_rdt.emulator.kernel import ResctrlKernel


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="nova-rdt-emulator-serve")
    p.add_argument("--profile", default=profiles.DEFAULT_PROFILE)
    p.add_argument("--mountpoint", required=True)
    p.add_argument("--kernel", default=None,
                   help="kernel release to behave as, X.Y (default: "
                        "$NOVA_RDT_EMULATOR_KERNEL, else the running "
                        f"kernel when >= 5.14, else {versions.FALLBACK})")
    args = p.parse_args(argv)
    try:
        profile = profiles.get(args.profile)
        kernel = versions.resolve(args.kernel)
    except ValueError as e:
        p.error(str(e))
    fusefs.serve(ResctrlKernel(profile, kernel=kernel), args.mountpoint)
    return 0


if __name__ == "__main__":
    sys.exit(main())
