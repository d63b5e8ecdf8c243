"""``nova-rdt emulate``: mount a kernel-faithful emulated resctrl."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

from nova_rdt.cmd import common


def register(sub) -> None:
    emu = sub.add_parser(
        "emulate", help="mount a kernel-faithful emulated resctrl",
        description="Mount an emulated resctrl filesystem for a host "
                    "profile.  With a command after '--', run it with the "
                    "emulator mounted and unmount afterwards.")
    emu.add_argument("--profile", default="gold-6252",
                     help="the emulated CPU (default: %(default)s; "
                          "--list-profiles lists them)")
    emu.add_argument("--kernel", metavar="VERSION",
                     help="kernel release to behave as, X.Y (default: the "
                          "running kernel's when the emulator models it)")
    emu.add_argument("--mountpoint", type=common.path,
                     help="where to mount (default: a new temp directory)")
    emu.add_argument("--namespace", action="store_true",
                     help="run the command in a private mount namespace "
                          "with the emulator at /sys/fs/resctrl and the "
                          "profile's cache topology in sysfs")
    emu.add_argument("--list-profiles", action="store_true",
                     help="list the profiles and exit")
    common.add_json_arg(emu, "--list-profiles's list", reads_config=False)
    common.add_log_arg(emu)
    emu.add_argument("command", nargs=argparse.REMAINDER,
                     help="after '--': a command to run with the emulator "
                          "mounted (its environment names the mount); "
                          "the emulator is unmounted when it ends")
    emu.set_defaults(func=emulate, exit_codes=EXIT_CODES)


EXIT_CODES = {
    0: "the profiles were listed, or the emulator was mounted and "
       "unmounted (Ctrl-C or SIGTERM)",
    1: "the emulator could not be mounted (FUSE, the mount point)",
    2: "usage: a bad flag, profile or kernel version",
    "N": "with a command after '--': the command's own exit status",
}


def emulate(args) -> int:
    from nova_rdt.emulator import mount
    from nova_rdt.emulator import profiles
    from nova_rdt.emulator import versions

    if args.list_profiles:
        width = max(map(len, profiles.PROFILES))
        common.report(
            args, {"profiles": {name: p.description for name, p in
                                sorted(profiles.PROFILES.items())}},
            "\n".join(f"{name:{width}}  {p.description}" for name, p in
                      sorted(profiles.PROFILES.items())))
        return 0
    profiles.get(args.profile)  # a clear error for an unknown name
    try:
        kernel = versions.resolve(args.kernel)
    except ValueError as e:
        raise common.CliError(f"--kernel: {e}") from None
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.namespace:
        if not command:
            raise common.CliError("--namespace needs a command after '--'")
        return mount.run_in_namespace(args.profile, command,
                                      kernel=str(kernel))
    emu = mount.Emulator(args.profile, mountpoint=args.mountpoint,
                         kernel=str(kernel))
    emu.start()
    try:
        if command:
            return subprocess.call(command, env={**os.environ, **emu.env()})
        print(f"emulated resctrl ({args.profile}, kernel {kernel}) mounted "
              f"at {emu.mountpoint}")
        for k, v in emu.env().items():
            print(f"export {k}={v}")
        print("Ctrl-C or SIGTERM unmounts it.", flush=True)
        signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
        signal.pause()
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        emu.stop()
