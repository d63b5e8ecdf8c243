"""``nova-rdt hook install|uninstall``: the libvirt hook and its settings."""

from __future__ import annotations

import os
import sys

from nova_rdt.cmd import common

DEFAULT_HOOKS_DIR = "/etc/libvirt/hooks"
DEFAULT_SETTINGS = "/etc/nova-rdt/hook.json"

INSTALL_EXIT_CODES = {
    0: "the hook and its settings are in place",
    1: "they could not be written (the hooks directory or the settings "
       "path)",
    2: "usage: a bad flag, a missing or invalid configuration file, or "
       "[rdt] settings this host refuses",
}
UNINSTALL_EXIT_CODES = {
    0: "the hook and its settings are gone (or were not there)",
    1: "they could not be removed",
    2: "usage: a bad flag",
}


def _paths(p, settings_help: str) -> None:
    p.add_argument("--hooks-dir", default=DEFAULT_HOOKS_DIR,
                   type=common.path,
                   help="libvirt's hooks directory (default: %(default)s)")
    p.add_argument("--settings-path", default=DEFAULT_SETTINGS,
                   type=common.path, help=settings_help)


def register(sub) -> None:
    hook = sub.add_parser("hook", help="the libvirt hook")
    hook_sub = hook.add_subparsers(dest="hook_cmd", required=True)
    inst = hook_sub.add_parser(
        "install", help="check the [rdt] settings, then write the hook "
                        "shim and the resolved settings (re-run after "
                        "every nova-rdt upgrade or [rdt] change)")
    common.add_settings_args(inst)
    _paths(inst, "where the resolved hook settings are written "
                 "(default: %(default)s)")
    inst.add_argument("--python", default=sys.executable,
                      type=common.program,
                      help="interpreter with nova_rdt that libvirtd's hook "
                           "runs (default: this one)")
    common.add_json_arg(inst)
    common.add_log_arg(inst)
    inst.set_defaults(func=install, exit_codes=INSTALL_EXIT_CODES)
    uninst = hook_sub.add_parser(
        "uninstall", help="remove the hook shim and its settings (idempotent)")
    _paths(uninst, "the hook settings file to remove (default: "
                   "%(default)s)")
    common.add_json_arg(uninst, reads_config=False)
    common.add_log_arg(uninst)
    uninst.set_defaults(func=uninstall, exit_codes=UNINSTALL_EXIT_CODES)


def install(args) -> int:
    from nova_rdt.hook import install as install_mod

    settings = common.settings(args)
    _check_host(settings)
    path = install_mod.install(settings, hooks_dir=args.hooks_dir,
                               settings_path=args.settings_path,
                               python=args.python)
    common.report(
        args, {"hook": path, "settings_path": args.settings_path,
               "python": args.python},
        f"installed {path} (settings {args.settings_path}); restart "
        f"libvirtd if this is the first install")
    return 0


def _check_host(settings) -> None:
    """On a host with resctrl mounted, what reconcile and the driver would
    refuse is refused before the hook is installed with it."""
    from nova_rdt.resctrl import capabilities
    from nova_rdt.resctrl import errors

    if not os.path.isdir(os.path.join(settings.resctrl_root, "info")):
        return
    try:
        caps = capabilities.discover(settings.resctrl_root,
                                     settings.sysfs_cpu_root)
    except errors.ResctrlError:
        return          # not a usable mount: nothing to check against
    settings.check_host(caps)


def uninstall(args) -> int:
    from nova_rdt.hook import install as install_mod

    paths = [os.path.join(args.hooks_dir, "qemu.d", "nova-rdt"),
             args.settings_path]
    # Said as it was: a second uninstall removes nothing and says so.
    present = [p for p in paths if os.path.lexists(p)]
    # The shim's markers live under the installed settings' state path.
    state_path = None
    try:
        from nova_rdt.host.settings import HookSettings
        state_path = HookSettings.load(args.settings_path).state_path
    except Exception:  # no or unreadable settings: no markers to find
        pass
    install_mod.uninstall(hooks_dir=args.hooks_dir,
                          settings_path=args.settings_path,
                          state_path=state_path)
    absent = [p for p in paths if p not in present]
    text = [f"removed {p}" for p in present] + \
        [f"{p}: not there, nothing to remove" for p in absent]
    common.report(args, {"removed": present, "absent": absent},
                  "\n".join(text))
    return 0
