"""What several ``nova-rdt`` commands share: the argument parser that
answers bad flags in one line, option types that name what they allow,
the exit codes, the one way Nova's configuration files are found, read
and checked, and what libraries may print.

Every error a user can cause is a :class:`CliError` (or another
``ValueError``) with a message naming the file, section, option or flag
and what is allowed; ``nova_rdt.cmd.main`` prints it as one line and exits
2 (:data:`EXIT_USAGE`).  What the host could not do exits 1
(:data:`EXIT_FAILURE`).  Unknown keys in ``[rdt]`` and ``[rdt_exporter]``
are refused, not ignored: those sections are nova-rdt's alone, so an
unknown key there is a typo whose option silently keeps its default.

A command that reads Nova's configuration reads what nova-compute reads
by default (``/etc/nova/nova.conf``, then ``/etc/nova/nova.conf.d/*.conf``)
and says which files it read; a file that is not there is an error, never
a silent fall back to built-in defaults.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import logging
import math
import os
import sys
import textwrap
import warnings

from nova_rdt import cliargs
from nova_rdt import exception
from nova_rdt.resctrl import capabilities as caps_mod

PROG = "nova-rdt"

# The exit codes of every command (``status upgrade check`` has
# oslo.upgradecheck's own: 0, 1, 2 and 255).
EXIT_OK = 0
EXIT_FAILURE = 1        # the command ran and the host could not do it
EXIT_USAGE = 2          # a bad flag, option value or configuration file
EXIT_INTERRUPTED = 130  # Ctrl-C, as a shell reports SIGINT

# What nova-compute reads when it is given no --config-file: oslo.config
# finds nova.conf and the nova.conf.d beside it.
DEFAULT_NOVA_CONF = "/etc/nova/nova.conf"
DEFAULT_NOVA_CONF_DIR = "/etc/nova/nova.conf.d"
# The sections nova-rdt owns in nova.conf or nova-rdt.conf.
OWN_SECTIONS = ("rdt", "rdt_exporter", "rdt_controller")


class CliError(exception.NovaRdtError, ValueError):
    """Bad input to a command; the message is the whole answer (exit 2)."""


class Failure(exception.NovaRdtError, RuntimeError):
    """What the host could not do; the message is the whole answer
    (exit 1)."""


class Parser(argparse.ArgumentParser):
    """argparse, answering a bad flag with one line instead of the usage,
    and ending a command's --help with what each exit status means."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")

    def format_help(self) -> str:
        text = super().format_help()
        codes = self._defaults.get("exit_codes")
        if codes and not self._subparsers:
            text += "\n" + exit_status_text(
                codes, self._get_formatter()._width)
        return text


def exit_status_text(codes: dict, width: int = 79) -> str:
    """The ``exit status:`` section of a command's --help: one code a
    line, its meaning wrapped under it (the table of doc/source/cli.rst
    says the same, from the same declaration)."""
    lines = ["exit status:"]
    for code in sorted(codes, key=lambda c: (isinstance(c, str), str(c)
                                             if isinstance(c, str)
                                             else f"{c:05d}")):
        lines += textwrap.wrap(str(codes[code]), width=max(width, 40),
                               initial_indent=f"  {code!s:<5}",
                               subsequent_indent=" " * 7)
    return "\n".join(lines) + "\n"


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


# Files and programs: the leaf's types, which lower layers' parsers
# (the RFC 2544 engine's) share.
path = cliargs.path
program = cliargs.program


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


def add_config_args(p: argparse.ArgumentParser, sections: str = "[rdt]",
                    named: str = "on stderr (or in --json's config_files)"
                    ) -> argparse._MutuallyExclusiveGroup:
    """--config-file, --config-dir and --no-config-files: where Nova's
    configuration is, as nova-compute is told (oslo.config's flags).
    ``named``: where the command says which files it read."""
    g = p.add_argument_group(
        "configuration",
        f"Which files hold {sections}.  Without any of these flags: "
        f"{DEFAULT_NOVA_CONF}, then {DEFAULT_NOVA_CONF_DIR}/*.conf in "
        f"name order, as nova-compute reads them; the files read are "
        f"named {named}.")
    ex = g.add_mutually_exclusive_group()
    ex.add_argument("--config-file", action="append", type=path,
                    metavar="FILE",
                    help=f"a nova.conf (or nova-rdt.conf) with {sections}; "
                         "repeatable, later files win (default: "
                         f"{DEFAULT_NOVA_CONF})")
    g.add_argument("--config-dir", action="append", type=path,
                   metavar="DIR",
                   help="read every *.conf in DIR, in name order, after "
                        "the --config-file files; repeatable (default: "
                        f"{DEFAULT_NOVA_CONF_DIR} when no --config-file "
                        "is given and it exists)")
    ex.add_argument("--no-config-files", action="store_true",
                    help="read no configuration file: nova-rdt's defaults "
                         "and the flags given here only (labs, tests)")
    return ex


def add_settings_args(p: argparse.ArgumentParser) -> None:
    ex = add_config_args(p)
    ex.add_argument("--settings", type=path,
                    help="a hook settings JSON (as written by 'nova-rdt "
                         "hook install') instead of Nova's configuration")


def add_json_arg(p: argparse.ArgumentParser, what: str = "the result",
                 reads_config: bool = True) -> None:
    """--json; ``reads_config``: the command reads Nova's configuration,
    and its document names the files (``config_files``)."""
    files = (" (with the configuration files read, as config_files)"
             if reads_config else "")
    p.add_argument("--json", action="store_true",
                   help=f"{what} as one JSON document on stdout, for "
                        f"scripts{files}")


def add_log_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--log-file", type=path, metavar="FILE",
                   help="append the libraries' log records and Python "
                        "warnings here, with nova-rdt's own, at debug "
                        "level (default: only nova-rdt's warnings, on "
                        "stderr)")


def add_service_args(p: argparse.ArgumentParser, sections: str,
                     state_path_use: str,
                     named: str = "in its start-up line") -> None:
    """The flags a long-running service shares: where its configuration
    is, and the paths that override it (unset: the configuration's)."""
    add_config_args(p, sections, named=named)
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


def add_listen_args(p: argparse.ArgumentParser, section: str,
                    labelled: str) -> None:
    """Where a service serves /metrics, and the host label it puts on
    ``labelled`` (the exporter and the controller say it alike)."""
    p.add_argument("--port", type=port,
                   help=f"/metrics port (default: [{section}] port; 0 "
                        f"picks a free one)")
    p.add_argument("--listen", help=f"/metrics address (default: "
                                    f"[{section}] listen_address)")
    p.add_argument("--host", help=f"the host label on {labelled} "
                                  f"(default: Nova's [DEFAULT] host from "
                                  f"the configuration, else the hostname, "
                                  f"as Nova defaults it)")


# -- configuration -------------------------------------------------------

def config_files(args) -> list[str]:
    """The files a command reads, in the order oslo.config reads them:
    each --config-file, then each --config-dir's ``*.conf`` in name
    order.  With none of the flags, Nova's own default: nova.conf must
    exist (a command never runs on built-in defaults by accident), its
    nova.conf.d is read when there is one.  ``--no-config-files``: none.
    """
    files = list(getattr(args, "config_file", None) or ())
    dirs = list(getattr(args, "config_dir", None) or ())
    if getattr(args, "no_config_files", False):
        if dirs:
            raise CliError("give --no-config-files or --config-dir, not "
                           "both")
        return []
    if not files and not dirs:
        if not os.path.isfile(DEFAULT_NOVA_CONF):
            raise CliError(
                f"{DEFAULT_NOVA_CONF}: no such file (read when no "
                "--config-file is given); pass --config-file with the "
                "nova.conf that holds [rdt]")
        files = [DEFAULT_NOVA_CONF]
        if os.path.isdir(DEFAULT_NOVA_CONF_DIR):
            dirs = [DEFAULT_NOVA_CONF_DIR]
    for f in files:
        if not os.path.isfile(f):
            raise CliError(f"--config-file {f}: no such file")
    out = list(files)
    for d in dirs:
        if not os.path.isdir(d):
            raise CliError(f"--config-dir {d}: no such directory")
        out += sorted(p for p in glob.glob(os.path.join(glob.escape(d),
                                                        "*.conf"))
                      if os.path.isfile(p))
    return out


def read_text(files: list[str]) -> str:
    return ", ".join(files) if files else "no file (defaults and flags)"


def say_read(files: list[str], what: str = "configuration") -> None:
    """One line on stderr naming what a command read (stdout stays the
    command's answer)."""
    print(f"{PROG}: {what} read from {read_text(files)}", file=sys.stderr)


def load_conf(config_files: list[str] | None, log_file: bool = False):
    """oslo.config with nova-rdt's options, read and checked in full.

    Exactly ``config_files`` are read: oslo.config's own search
    (``~/.nova-rdt``, ``/etc/nova-rdt``...) is turned off, so nothing is
    read that :func:`config_files` did not name.  Every ``[rdt]`` and
    ``[rdt_exporter]`` value is read here, so that a bad one is reported
    now, naming its file and line, and not as a traceback wherever it is
    first used.
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
        conf([], project="nova-rdt",
             default_config_files=list(config_files or ()),
             default_config_dirs=[], validate_default_values=True)
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
    """Hook settings from --settings (JSON) or Nova's configuration
    (oslo), validated (HookSettings checks every field when it is made).
    The files read are left in ``args.read_files`` and, unless --json
    reports them, named on stderr at once: before anything can fail."""
    from nova_rdt.host.settings import HookSettings

    if getattr(args, "settings", None):
        if getattr(args, "config_dir", None):
            raise CliError("give --settings or --config-dir, not both")
        loaded = HookSettings.load(args.settings)
        _read(args, [args.settings], "hook settings")
        return loaded
    files = config_files(args)
    conf = load_conf(files, log_file=True)
    try:
        loaded = HookSettings.from_conf(conf)
    except ValueError as e:
        where = ", ".join(files) or "(defaults)"
        raise CliError(f"{where}: {e}") from None
    _read(args, files)
    return loaded


def _read(args, files: list[str], what: str = "configuration") -> None:
    args.read_files = files
    if not getattr(args, "json", False):
        say_read(files, what)


def report(args, doc: dict, text: str) -> None:
    """A command's answer: ``doc`` as JSON with --json (with the files
    read, as ``config_files``), else ``text``."""
    import json

    if getattr(args, "json", False):
        read = getattr(args, "read_files", None)
        if read is not None:
            doc = {**doc, "config_files": read}
        json.dump(doc, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    elif text:
        print(text)


def fail(message: str, code: int = EXIT_USAGE) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return code


class _OwnWarnings(logging.Formatter):
    def format(self, record):
        return f"{PROG}: {record.levelname.lower()}: {record.getMessage()}"


def _warnings_to_log(deprecations: int = logging.WARNING):
    """A ``warnings.showwarning`` that logs each warning as one record,
    deprecation notices at level ``deprecations``."""
    def show(message, category, filename, lineno, file=None, line=None):
        text = warnings.formatwarning(message, category, filename, lineno,
                                      line).rstrip()
        level = deprecations if _is_deprecation(category) \
            else logging.WARNING
        logging.getLogger("py.warnings").log(level, "%s", text)
    return show


SERVICE_LOG_FORMAT = ("%(asctime)s %(process)d %(levelname)s %(name)s "
                      "%(message)s")


def _is_deprecation(category: type) -> bool:
    # eventlet's EventletDeprecationWarning derives from Warning itself.
    return issubclass(category, (DeprecationWarning,
                                 PendingDeprecationWarning,
                                 FutureWarning)) \
        or category.__name__.endswith("DeprecationWarning")


def service_logging(debug: bool = False) -> None:
    """The log of a long-running service (the exporter, the controller),
    on stderr, which is its journal: nova-rdt's own records from INFO
    (DEBUG with ``debug``), libraries' from WARNING.  What libraries say
    about themselves at import, such as oslo.service loading its eventlet
    backend and eventlet's deprecation notice, is not the operator's
    business: INFO records and deprecation warnings stay out; any other
    Python warning is logged as one record."""
    logging.basicConfig(level=logging.WARNING, format=SERVICE_LOG_FORMAT)
    logging.getLogger("nova_rdt").setLevel(
        logging.DEBUG if debug else logging.INFO)
    warnings.showwarning = _warnings_to_log(deprecations=logging.DEBUG)


@contextlib.contextmanager
def library_output(log_file: str | None):
    """What a one-shot command lets through to the terminal: its answer,
    its errors and nova-rdt's own warnings, one line each.  Libraries'
    log records (ovsdbapp's connection attempts...) and Python warnings
    (eventlet's deprecation, when ovs imports it) go to ``log_file``, or
    nowhere.

    Python's last-resort handler would print any library's warning bare
    on stderr; logging that is already configured (an embedding process,
    a test runner) is left as it is.  Undone on exit.
    """
    root = logging.getLogger()
    own = logging.getLogger("nova_rdt")
    added: list[tuple[logging.Logger, logging.Handler]] = []
    level = root.level
    with warnings.catch_warnings():
        warnings.showwarning = _warnings_to_log()
        if not root.handlers:
            if log_file:
                fh = logging.FileHandler(log_file)
                fh.setFormatter(logging.Formatter(
                    "%(asctime)s %(process)d %(levelname)s %(name)s "
                    "%(message)s"))
                added.append((root, fh))
                root.setLevel(logging.DEBUG)
            else:
                added.append((root, logging.NullHandler()))
                root.setLevel(logging.WARNING)
            sh = logging.StreamHandler(sys.stderr)
            sh.setLevel(logging.WARNING)
            sh.setFormatter(_OwnWarnings())
            added.append((own, sh))
            for logger, handler in added:
                logger.addHandler(handler)
        try:
            yield
        finally:
            for logger, handler in added:
                logger.removeHandler(handler)
                handler.close()
            root.setLevel(level)
