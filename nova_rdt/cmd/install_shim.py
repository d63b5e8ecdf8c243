"""``nova-rdt shim install|uninstall``: put ``nova/virt/rdt`` where
nova-compute looks (``nova-rdt install-shim``, the earlier verb, is a
deprecated alias for one release).

Nova loads ``compute_driver = rdt.LibvirtRDTDriver`` by importing
``nova.virt.rdt``, and ``nova`` is a regular package: only the
``nova/virt`` that the service's interpreter imports counts.  pip puts the
shim in site-packages, which is the wrong place when Nova comes from a
source tree (devstack's ``setup_develop``) or from distribution packages in
another interpreter.  This command asks that interpreter for
``nova.virt.__path__`` and writes the shim there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from nova_rdt import exception
from nova_rdt.cmd import common

# The first line marks a file as nova-rdt's, so that --uninstall and a
# re-install never touch someone else's nova/virt/rdt.
MARKER = '"""nova-rdt shim: ``compute_driver = rdt.LibvirtRDTDriver``.'
SHIM = MARKER + '''

Nova imports ``'nova.virt.' + compute_driver``; the driver itself lives in
:mod:`nova_rdt.virt.driver`.  Only this one package is shipped under
``nova/`` (no ``nova/__init__.py``), so Nova's own files are untouched.
``nova-rdt install-shim`` writes this file into the ``nova/virt`` that
nova-compute imports.
"""

from nova_rdt.virt.driver import LibvirtRDTDriver

__all__ = ["LibvirtRDTDriver"]
'''

# Shims of earlier nova-rdt releases start so.
_OURS = (MARKER, '"""Shim so that ``[DEFAULT] compute_driver = '
         'rdt.LibvirtRDTDriver`` works.')

_PROBE = ("import json, nova.virt, nova_rdt.virt.driver; "
          "print(json.dumps(list(nova.virt.__path__)))")
_PROBE_NOVA_ONLY = ("import json, nova.virt; "
                    "print(json.dumps(list(nova.virt.__path__)))")


class ShimError(exception.NovaRdtError, ValueError):
    """A target that cannot take the shim; the message is the answer."""


def virt_dir_of(python: str, need_nova_rdt: bool = True) -> str:
    """The ``nova/virt`` directory that ``python`` imports."""
    try:
        res = subprocess.run([python, "-c", _PROBE if need_nova_rdt
                              else _PROBE_NOVA_ONLY],
                             capture_output=True, text=True, timeout=120)
    except OSError as e:
        raise ShimError(f"--python {python}: cannot run it "
                        f"({e.strerror})") from None
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or ["?"])[-1]
        what = "nova and nova_rdt" if need_nova_rdt else "nova"
        raise ShimError(
            f"--python {python}: cannot import {what} ({last}); give the "
            "interpreter that runs nova-compute, with nova-rdt installed "
            "in its environment")
    try:
        paths = json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise ShimError(f"--python {python}: unexpected answer "
                        f"{res.stdout!r}") from None
    if not paths:
        raise ShimError(f"--python {python}: nova.virt has no __path__")
    return paths[0]


def shim_path(virt_dir: str) -> str:
    return os.path.join(virt_dir, "rdt", "__init__.py")


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return None


def install(virt_dir: str) -> str:
    """Write the shim; "installed", "unchanged" or "updated"."""
    if not os.path.isdir(virt_dir):
        raise ShimError(f"{virt_dir}: not a directory (nova/virt expected)")
    path = shim_path(virt_dir)
    current = _read(path)
    if current == SHIM:
        return "unchanged"
    if current is not None and not current.startswith(_OURS):
        raise ShimError(f"{path} exists and is not nova-rdt's shim; "
                        "remove it by hand if it is stale")
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".shim-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(SHIM)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return "installed" if current is None else "updated"


def uninstall(virt_dir: str) -> str:
    """Remove the shim; "removed" or "absent"."""
    path = shim_path(virt_dir)
    current = _read(path)
    if current is None:
        return "absent"
    if not current.startswith(_OURS):
        raise ShimError(f"{path} is not nova-rdt's shim; left in place")
    os.unlink(path)
    pkg = os.path.dirname(path)
    cache = os.path.join(pkg, "__pycache__")
    if os.path.isdir(cache):
        for name in os.listdir(cache):
            if name.startswith("__init__."):
                os.unlink(os.path.join(cache, name))
        if not os.listdir(cache):
            os.rmdir(cache)
    if not os.listdir(pkg):
        os.rmdir(pkg)
    return "removed"


EXIT_CODES = {
    0: "the shim is in place (installed, updated or unchanged), or gone",
    1: "the shim could not be written or removed (the filesystem)",
    2: "usage: a bad flag, an interpreter that cannot import Nova, or a "
       "nova/virt/rdt that is not nova-rdt's",
}
DEPRECATED = ("'nova-rdt install-shim' is deprecated and will be removed "
              "in the next release: use 'nova-rdt shim install' (and "
              "'nova-rdt shim uninstall' for --uninstall)")


def _target_args(p) -> None:
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--python", default=sys.executable, type=common.program,
        help="the interpreter that runs nova-compute; its nova.virt is "
             "the target (default: this one, %(default)s)")
    where.add_argument(
        "--virt-dir", type=common.path,
        help="write into this nova/virt directory instead (e.g. "
             "$NOVA_DIR/nova/virt)")
    common.add_json_arg(p, reads_config=False)
    common.add_log_arg(p)


def register(sub) -> None:
    description = __doc__.split("\n\n")[1]
    shim = sub.add_parser(
        "shim", help="the nova/virt/rdt shim inside the Nova that "
                     "nova-compute imports")
    shim_sub = shim.add_subparsers(dest="shim_cmd", required=True)
    inst = shim_sub.add_parser(
        "install", help="put the shim into nova.virt of --python (or "
                        "--virt-dir)", description=description)
    _target_args(inst)
    inst.set_defaults(func=run, uninstall=False, exit_codes=EXIT_CODES)
    uninst = shim_sub.add_parser(
        "uninstall", help="remove the shim (only if it is nova-rdt's)",
        description=description)
    _target_args(uninst)
    uninst.set_defaults(func=run, uninstall=True, exit_codes=EXIT_CODES)

    # The verb of earlier releases, kept for one release.
    p = sub.add_parser(
        "install-shim",
        help="deprecated: 'nova-rdt shim install' / 'shim uninstall'",
        description=description + "\n\n" + DEPRECATED + ".")
    _target_args(p)
    p.add_argument("--uninstall", action="store_true",
                   help="remove the shim (only if it is nova-rdt's)")
    p.set_defaults(func=deprecated_run, exit_codes=EXIT_CODES)


def deprecated_run(args) -> int:
    print(f"{common.PROG}: warning: {DEPRECATED}", file=sys.stderr)
    return run(args)


def run(args) -> int:
    """ShimError and OSError end in nova_rdt.cmd.main as one line."""
    virt_dir = args.virt_dir or virt_dir_of(
        args.python, need_nova_rdt=not args.uninstall)
    outcome = uninstall(virt_dir) if args.uninstall else install(virt_dir)
    common.report(args, {"shim": shim_path(virt_dir), "outcome": outcome},
                  f"{shim_path(virt_dir)}: {outcome}")
    return 0
