"""What several ``nova-rdt`` commands share: the argument parser that
answers bad flags in one line, option types that name what they allow,
and the one way the ``[rdt]`` configuration is loaded and checked.

Every error a user can cause is a :class:`CliError` (or another
``ValueError``) with a message naming the file, section, option or flag
and what is allowed; ``nova_rdt.cmd.main`` prints it as one line and exits
2.  Unknown keys in ``[rdt]`` and ``[rdt_exporter]`` are refused, not
ignored: those sections are nova-rdt's alone, so an unknown key there is a
typo whose option silently keeps its default.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys

from nova_rdt.resctrl import capabilities as caps_mod

PROG = "nova-rdt"
# The sections nova-rdt owns in nova.conf or nova-rdt.conf.
OWN_SECTIONS = ("rdt", "rdt_exporter", "rdt_controller")


class CliError(ValueError):
    """Bad input to a command; the message is the whole answer."""


class Parser(argparse.ArgumentParser):
    """argparse, answering a bad flag with one line instead of the usage."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


# -- option types: the message names what is allowed; argparse adds the
# -- flag ("argument --port: ...").

def port(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or len(text) > 5 \
            or int(text) > 65535:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a port: use 0-65535 (0 picks a free one)")
    return int(text)


def seconds(text: str) -> float:
    try:
        value = float(text) if text.isascii() else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not 0 <= value <= 3600:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of seconds: use 0-3600")
    return value


def path(text: str) -> str:
    """A file or directory named on the command line, made absolute here,
    once: what a command derives from it ([rdt] paths, a hook's
    settings, a report's links) must not depend on the directory a later
    step runs in, and Nova refuses relative [rdt] paths."""
    if not text or "\0" in text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a path")
    return os.path.abspath(os.path.expanduser(text))


def program(text: str) -> str:
    """An interpreter or other program: a bare name is looked up on PATH,
    anything with a slash is a path, made absolute (it ends up in a
    hook's shebang, which a relative path would break)."""
    if not text or "\0" in text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a program")
    if "/" not in text:
        found = shutil.which(text)
        if found is None:
            raise argparse.ArgumentTypeError(f"{text!r}: not found on PATH")
        return found
    return path(text)


# -- shared flags --------------------------------------------------------

def add_root_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--resctrl-root", type=path,
        default=os.environ.get("NOVA_RDT_RESCTRL_ROOT", caps_mod.DEFAULT_ROOT),
        help="resctrl mount point (default: $NOVA_RDT_RESCTRL_ROOT or "
             "%(default)s)")
    p.add_argument(
        "--sysfs-cpu-root", type=path,
        default=os.environ.get("NOVA_RDT_SYSFS_CPU",
                               caps_mod.DEFAULT_SYSFS_CPU),
        help="where cpu*/cache/index*/ are read (default: "
             "$NOVA_RDT_SYSFS_CPU or %(default)s)")


def add_settings_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config-file", action="append", type=path,
                   help="nova-rdt.conf (or nova.conf) with the [rdt] "
                        "options; repeatable")
    p.add_argument("--settings", type=path,
                   help="a hook settings JSON (as written by "
                        "'nova-rdt hook install') instead of --config-file")


def add_service_args(p: argparse.ArgumentParser, sections: str,
                     state_path_use: str) -> None:
    """The flags a long-running service shares: where its configuration
    is, and the paths that override it (unset: the configuration's)."""
    p.add_argument("--config-file", action="append", type=path,
                   help=f"nova-rdt.conf with {sections}; repeatable")
    p.add_argument("--resctrl-root", type=path,
                   default=os.environ.get("NOVA_RDT_RESCTRL_ROOT"),
                   help="resctrl mount point (default: [rdt] "
                        "resctrl_root)")
    p.add_argument("--sysfs-cpu-root", type=path,
                   default=os.environ.get("NOVA_RDT_SYSFS_CPU"),
                   help="where cpu*/cache/index*/ are read (default: [rdt] "
                        "sysfs_cpu_root)")
    p.add_argument("--state-path", type=path,
                   help=f"the hook's records{state_path_use} (default: "
                        f"[rdt] state_path)")


# -- configuration -------------------------------------------------------

def load_conf(config_files: list[str] | None, log_file: bool = False):
    """oslo.config with nova-rdt's options, read and checked in full.

    Every ``[rdt]`` and ``[rdt_exporter]`` value is read here, so that a
    bad one is reported now, naming its file and line, and not as a
    traceback wherever it is first used.
    """
    from oslo_config import cfg

    from nova_rdt import conf as conf_mod

    conf = cfg.ConfigOpts()
    conf_mod.register_opts(conf)
    if log_file:
        conf.register_opt(cfg.StrOpt("log_file"))
    for path in config_files or ():
        if not os.path.isfile(path):
            raise CliError(f"--config-file {path}: no such file")
    try:
        conf([], project="nova-rdt", default_config_files=config_files
             or None, validate_default_values=True)
    except cfg.ConfigFileParseError as e:
        raise CliError(f"{e.config_file}: not a valid ini file: "
                       f"{e.msg}") from None
    except cfg.Error as e:
        raise CliError(str(e)) from None
    keys = _ini_keys(conf.config_file or [])
    for group, opts in conf_mod.list_opts():
        known = {o.dest for o in opts}
        for (section, key), (path, lineno, _value) in keys.items():
            if section == group.name and key not in known:
                raise CliError(
                    f"{path}:{lineno}: unknown option [{section}] {key}; "
                    f"known: {', '.join(sorted(known))}")
        for o in opts:
            try:
                getattr(conf[group.name], o.dest)
            except (cfg.Error, ValueError) as e:
                path, lineno, value = keys.get((group.name, o.dest),
                                               ("?", 0, "?"))
                raise CliError(f"{path}:{lineno}: [{group.name}] {o.dest} = "
                               f"{value!r}: {_reason(e, o)}") from None
    return conf


def _reason(e: Exception, opt) -> str:
    text = str(e).split(" is not valid: ", 1)[-1]
    kind = getattr(opt.type, "type_name", "value")
    if text.startswith(("invalid literal", "could not convert")):
        text = f"not an {kind}" if kind[0] in "aeiou" else f"not a {kind}"
    lo, hi = getattr(opt.type, "min", None), getattr(opt.type, "max", None)
    if lo is not None or hi is not None:
        text += f" (allowed: {'' if lo is None else lo}-" \
                f"{'' if hi is None else hi})"
    return text


def _ini_keys(paths) -> dict[tuple[str, str], tuple[str, int, str]]:
    """(section, key) -> (file, line, last value) of nova-rdt's sections."""
    from oslo_config import iniparser

    found: dict[tuple[str, str], tuple[str, int, str]] = {}

    class Keys(iniparser.BaseParser):
        section = ""

        def new_section(self, section):
            self.section = section

        def assignment(self, key, value):
            if self.section in OWN_SECTIONS:
                found[self.section, key] = (path, self.lineno,
                                            "\n".join(value))

    for path in paths:
        with open(path) as f:
            Keys().parse(f)
    return found


def settings(args):
    """Hook settings from --settings (JSON) or --config-file (oslo),
    validated (HookSettings checks every field when it is made)."""
    from nova_rdt.host.settings import HookSettings

    if getattr(args, "settings", None):
        if args.config_file:
            raise CliError("give --settings or --config-file, not both")
        return HookSettings.load(args.settings)
    conf = load_conf(args.config_file, log_file=True)
    try:
        return HookSettings.from_conf(conf)
    except ValueError as e:
        where = ", ".join(conf.config_file or ()) or "(defaults)"
        raise CliError(f"{where}: {e}") from None


def fail(message: str, code: int = 2) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return code
