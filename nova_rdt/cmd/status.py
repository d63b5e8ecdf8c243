"""``nova-rdt status upgrade check``: is this host set up for nova-rdt?

In the form of ``nova-status upgrade check`` (oslo.upgradecheck): one row
per check, each Success, Warning or Failure; a row that is not a success
ends with a "Fix:" line; the exit status is the worst code (0, 1, 2), or
255 when the checks could not run (oslo.upgradecheck's "error": a missing
or invalid configuration file, an unexpected exception).

Each check belongs to a node role: the driver, resctrl, the hook,
rootwrap and the exporter to a compute, the filter to a scheduler, the
paste filter to an API node.  ``--role`` says which roles this node has;
without it they are read from the configuration (compute_driver,
enabled_filters, the API's paste pipeline), and when none is configured
every check runs.  A compute is not failed for lacking the scheduler's
filter.

Nothing is changed and nothing privileged is started: rootwrap is asked
whether it *would* run the privsep helper, the driver is imported in the
interpreter that runs nova-compute.
"""

from __future__ import annotations

import argparse
import configparser
import contextlib
import dataclasses
import io
import json
import os
import ssl
import subprocess
import sys
import urllib.error
import urllib.request

from nova_rdt import exception
from nova_rdt.cmd import common

DRIVER = "rdt.LibvirtRDTDriver"
FILTER = "nova_rdt.scheduler.filter.RDTFilter"
PASTE_FACTORY = "nova_rdt.api.flavor_check:filter_factory"
PASTE_COMPOSITE = "composite:openstack_compute_api_v21"
# Nova's factory for its compute API pipelines (nova/api/auth.py).
PIPELINE_FACTORY = "call:nova.api.auth:pipeline_factory_v21"
CONTEXT = "nova_rdt.privsep.sys_admin_pctxt"
DEFAULT_NOVA_CONF = common.DEFAULT_NOVA_CONF
ROLES = ("api", "scheduler", "compute")
# oslo.upgradecheck's code when the checks could not run at all.
EXIT_ERROR = 255

EXIT_CODES = {
    0: "every check of this node's roles passed",
    1: "at least one check warned, none failed",
    2: "at least one check failed (each row says how to fix it); also a "
       "bad flag, as argparse and nova-status answer one",
    255: "the checks could not run: a missing or invalid configuration "
         "file, or an unexpected error (oslo.upgradecheck's code)",
}


@dataclasses.dataclass
class Outcome:
    """A check's answer: 0 success, 1 warning, 2 failure (Code's values)."""
    code: int
    details: str
    fix: str | None = None

    def text(self) -> str:
        return self.details + (f" Fix: {self.fix}" if self.fix else "")


def ok(details: str) -> Outcome:
    return Outcome(0, details)


def warn(details: str, fix: str) -> Outcome:
    return Outcome(1, details, fix)


def fail(details: str, fix: str) -> Outcome:
    return Outcome(2, details, fix)


@dataclasses.dataclass
class Env:
    """What the checks look at, read once."""
    config_files: list[str]
    rdt: object                    # nova-rdt's [rdt] group
    exporter: object               # [rdt_exporter]
    exporter_configured: bool
    compute_driver: str | None
    available_filters: list[str]
    enabled_filters: list[str]
    api_paste: str
    rootwrap_config: str
    python: str
    hooks_dir: str
    settings_path: str
    conf: object = None            # the whole nova-rdt config
    roles: tuple[str, ...] = ROLES
    roles_from: str = "--role"     # or "configuration", or "nothing"
    # The files are Nova's default ones (no --config-file, --config-dir
    # or --no-config-files given): a fix need not name them.
    default_files: bool = False

    @property
    def roles_given(self) -> bool:
        """Whether the node claims its roles (--role, or configured), so
        that a missing part of one is a failure, not a guess."""
        return self.roles_from != "nothing"


# -- the checks: each takes the Env, returns an Outcome -------------------

_DRIVER_PROBE = """
import json, os, sys
out = {}
try:
    import nova.virt
    out["virt"] = list(nova.virt.__path__)
    import nova.virt.rdt as shim
    out["shim"] = shim.__file__
    from nova_rdt.virt.driver import LibvirtRDTDriver
    out["same"] = shim.LibvirtRDTDriver is LibvirtRDTDriver
except Exception as e:
    out["error"] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""


def check_driver(env: Env) -> Outcome:
    fix = f"nova-rdt shim install --python {env.python}"
    try:
        res = subprocess.run([env.python, "-c", _DRIVER_PROBE],
                             capture_output=True, text=True, timeout=120)
        out = json.loads(res.stdout.strip().splitlines()[-1])
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired) as e:
        return fail(f"cannot run {env.python} ({e}).",
                    "give --python the interpreter that runs nova-compute")
    if "error" in out:
        return fail(f"{env.python} cannot import nova.virt.rdt "
                    f"({out['error']}).", fix)
    shim_dir = os.path.dirname(os.path.dirname(out["shim"]))
    if not out.get("same") or shim_dir not in out["virt"]:
        return fail(f"nova.virt.rdt at {out['shim']} is not nova-rdt's "
                    "driver shim.", fix)
    where = f"{DRIVER} loads from {out['shim']}."
    if env.compute_driver != DRIVER:
        result = fail if env.roles_given else warn
        return result(where + f" [DEFAULT] compute_driver is "
                      f"{env.compute_driver or 'not set'} in "
                      f"{_files(env)}.",
                      f"set [DEFAULT] compute_driver = {DRIVER} on RDT "
                      "computes")
    return ok(where + " compute_driver uses it.")


def check_filters(env: Env) -> Outcome:
    missing = []
    if FILTER not in env.available_filters:
        missing.append("available_filters")
    if "RDTFilter" not in env.enabled_filters:
        missing.append("enabled_filters")
    if not missing:
        return ok("RDTFilter is in [filter_scheduler] available_filters "
                  "and enabled_filters.")
    fix = []
    if "available_filters" in missing:
        fix.append(f"add 'available_filters = {FILTER}' beside "
                   "'available_filters = nova.scheduler.filters."
                   "all_filters'")
    if "enabled_filters" in missing:
        fix.append("append RDTFilter to enabled_filters")
    return fail(f"RDTFilter is not in [filter_scheduler] "
                f"{' nor '.join(missing)} of {_files(env)}.",
                "; ".join(fix) + " (nova-scheduler's nova.conf)")


def check_resctrl(env: Env) -> Outcome:
    from nova_rdt.resctrl import capabilities

    root = env.rdt.resctrl_root
    fix = (f"mount -t resctrl resctrl {root} (at boot: "
           "etc/systemd/sys-fs-resctrl.mount), on a CPU with RDT")
    try:
        caps = capabilities.discover(root, env.rdt.sysfs_cpu_root)
    except Exception as e:       # whatever the probe meets: say it
        if env.rdt.require_resctrl:
            return fail(f"resctrl is not usable at {root} ({e}); "
                        "nova-compute will refuse to start "
                        "(require_resctrl = True).",
                        fix + "; or [rdt] require_resctrl = False")
        return warn(f"resctrl is not usable at {root} ({e}); this host "
                    "offers no RDT (require_resctrl = False).", fix)
    return ok(f"resctrl at {root}: {describe(caps)}.")


def describe(caps) -> str:
    """One line of what a resctrl mount supports."""
    parts = []
    for name, c in sorted(caps.cache.items()):
        parts.append(f"{name} CAT {c.cbm_len} ways x "
                     f"{len(c.domains)} cache ids, {c.num_closids} CLOS")
    if caps.cdp:
        parts.append("CDP on")
    for name in sorted(caps.bandwidth):
        parts.append(f"{name} in {'MBps' if caps.mba_mbps else 'percent'}")
    for name, m in sorted(caps.monitoring.items()):
        parts.append(f"{name} {'/'.join(m.features)}")
    return ", ".join(parts) or "no allocation or monitoring resources"


def check_hook(env: Env) -> Outcome:
    from nova_rdt.host.settings import HookSettings

    shim = os.path.join(env.hooks_dir, "qemu.d", "nova-rdt")
    fix = (f"{_with_files('nova-rdt hook install', env)}, then restart "
           "libvirtd once")
    if not os.access(shim, os.X_OK):
        return fail(f"no executable hook at {shim}.", fix)
    try:
        installed = HookSettings.load(env.settings_path)
    except Exception as e:
        return fail(f"the hook's settings {env.settings_path} are not "
                    f"valid ({e}).", fix)
    if env.config_files:
        try:
            wanted = HookSettings.from_conf(env.conf)
        except ValueError as e:
            return fail(f"[rdt] in {_files(env)} is not valid ({e}).",
                        "correct [rdt], then " + fix)
        if wanted != installed:
            return warn(f"the hook at {shim} runs with settings that "
                        f"differ from [rdt] in {_files(env)}.",
                        "re-run " + fix.split(",")[0])
    return ok(f"hook at {shim}, settings {env.settings_path} valid.")


def paste_filter_names(parser: configparser.RawConfigParser) -> list[str]:
    return [s.split(":", 1)[1] for s in parser.sections()
            if s.startswith("filter:") and
            parser.get(s, "paste.filter_factory",
                       fallback="").strip() == PASTE_FACTORY]


def compute_pipelines(parser: configparser.RawConfigParser
                      ) -> dict[str, list[str]]:
    """The compute API composites nova-api serves -> the URL prefixes it
    serves each at: every ``pipeline_factory_v21`` composite that a
    urlmap routes to (``/v2.1/+``, and ``/v2/+``, the legacy
    v2-compatible API that Nova still serves by default).  Without a
    urlmap, every such composite, at no known prefix."""
    composites = [s.split(":", 1)[1] for s in parser.sections()
                  if s.startswith("composite:") and
                  parser.get(s, "use", fallback="").strip() ==
                  PIPELINE_FACTORY]
    routes: dict[str, list[str]] = {}
    for section in parser.sections():
        if not section.startswith("composite:") or \
                "urlmap" not in parser.get(section, "use", fallback=""):
            continue
        for prefix, target in parser.items(section):
            if prefix.startswith("/") and target.strip() in composites:
                routes.setdefault(target.strip(), []).append(prefix)
    if not routes:
        return {c: [] for c in composites}
    return routes


def check_paste(env: Env) -> Outcome:
    path = env.api_paste
    fix = (f"add [filter:rdt_flavor_check] paste.filter_factory = "
           f"{PASTE_FACTORY} to {path}, and rdt_flavor_check to the "
           f"keystone pipeline of [{PASTE_COMPOSITE}] after "
           "keystonecontext; restart nova-api")
    if not os.path.exists(path):
        if env.roles_given:
            return fail(f"no {path} on this API node ([wsgi] "
                        "api_paste_config, or --api-paste).", fix)
        return warn(f"no {path}: not an API node, or [wsgi] "
                    "api_paste_config names another file.", fix)
    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read(path)
    except configparser.Error as e:
        return fail(f"{path} is not a valid ini file ({e}).", fix)
    names = paste_filter_names(parser)
    if not names:
        return fail(f"{path} defines no filter with {PASTE_FACTORY}.", fix)
    pipeline = parser.get(PASTE_COMPOSITE, "keystone", fallback="").split()
    if not set(names) & set(pipeline):
        return fail(f"the keystone pipeline of [{PASTE_COMPOSITE}] in "
                    f"{path} does not use {names[0]}.", fix)
    # The other compute pipelines nova-api serves: a flavor set through
    # them would skip the whole-flavor check (and Nova's own per-key
    # validation, which starts at microversion 2.86).
    bypass = [(c, prefixes) for c, prefixes in
              sorted(compute_pipelines(parser).items())
              if c != PASTE_COMPOSITE.split(":", 1)[1] and
              not set(names) & set(parser.get(f"composite:{c}", "keystone",
                                              fallback="").split())]
    if bypass:
        where = "; ".join(f"[composite:{c}]" + (
            f" (served at {', '.join(p)})" if p else "")
            for c, p in bypass)
        return warn(f"{names[0]} is in the keystone pipeline of "
                    f"[{PASTE_COMPOSITE}], not in {where} of {path}: "
                    "flavor extra specs set through it are not checked.",
                    f"add {names[0]} after keystonecontext in the "
                    "keystone pipeline of each (or stop serving it); "
                    "restart nova-api")
    return ok(f"{names[0]} is in the keystone pipeline of every compute "
              f"API nova-api serves ([{PASTE_COMPOSITE}]"
              + "".join(f", [composite:{c}]" for c in
                        sorted(compute_pipelines(parser))
                        if f"composite:{c}" != PASTE_COMPOSITE)
              + f") in {path}.")


def check_rootwrap(env: Env) -> Outcome:
    """Would ``nova-rootwrap <conf> privsep-helper ...`` run the helper for
    nova-rdt's context, as nova-compute asks it to?"""
    path = env.rootwrap_config
    fix = (f"install {_filters_file()} into a filters_path directory of "
           f"{path}")
    try:
        from oslo_rootwrap import wrapper
    except ImportError:
        return fail("oslo.rootwrap is not installed here.",
                    "pip install oslo.rootwrap (Nova depends on it)")
    parser = configparser.RawConfigParser()
    if not parser.read(path):
        return fail(f"no rootwrap config at {path}.",
                    "install Nova's rootwrap.conf, or set [DEFAULT] "
                    "rootwrap_config")
    try:
        rw = wrapper.RootwrapConfig(parser)
    except Exception as e:
        return fail(f"{path} is not a valid rootwrap config ({e}).", fix)
    conf_file = (env.config_files or [DEFAULT_NOVA_CONF])[0]
    cmd = ["privsep-helper", "--config-file", conf_file,
           "--privsep_context", CONTEXT, "--privsep_sock_path",
           "/tmp/nova-rdt-status/privsep.sock"]
    filters = wrapper.load_filters(rw.filters_path)
    try:
        matched = wrapper.match_filter(filters, cmd,
                                       exec_dirs=rw.exec_dirs)
    except wrapper.FilterMatchNotExecutable:
        return fail(f"privsep-helper is not in exec_dirs of {path} "
                    f"({', '.join(rw.exec_dirs)}).",
                    "add the directory of Nova's privsep-helper to "
                    "exec_dirs")
    except wrapper.NoFilterMatched:
        return fail(f"no filter of {path} allows {CONTEXT}.", fix)
    helper = matched.get_exec(exec_dirs=rw.exec_dirs)
    importable = _helper_imports(helper)
    if importable is not None:
        return fail(f"{helper} cannot import {CONTEXT} ({importable}).",
                    "install nova-rdt where Nova's privsep-helper runs")
    if not matched.name.startswith("privsep-rootwrap-nova_rdt"):
        return warn(f"only oslo.rootwrap's catch-all for privsep-helper "
                    f"would start {CONTEXT} (filter {matched.name}); "
                    "nova-rdt's filter is not installed.", fix)
    return ok(f"{path}: filter {matched.name} starts {helper} for "
              f"{CONTEXT}.")


def _helper_imports(helper: str) -> str | None:
    """Why the helper's interpreter cannot import the context, or None."""
    try:
        with open(helper, "rb") as f:
            first = f.readline().decode(errors="replace")
    except OSError as e:
        return str(e)
    python = first[2:].strip().split()[0] if first.startswith("#!") \
        else sys.executable
    if os.path.basename(python) == "env":
        python = first[2:].split()[1]
    module, _, attr = CONTEXT.rpartition(".")
    try:
        res = subprocess.run([python, "-c", f"import {module} as m; "
                              f"m.{attr}"], capture_output=True, text=True,
                             timeout=120)
    except OSError as e:
        return f"{python}: {e.strerror}"
    if res.returncode:
        return (res.stderr.strip().splitlines() or ["?"])[-1]
    return None


def check_exporter(env: Env) -> Outcome:
    """Does the exporter answer on its port, as its web config serves it
    (HTTPS with ``tls_server_config``, 401 without a password with
    ``basic_auth_users``)?  Only whether it answers is asked: whether
    Prometheus trusts its certificate is Prometheus's check."""
    if not env.exporter_configured:
        return ok("no [rdt_exporter] section: the exporter is not "
                  "configured here (nothing to check).")
    e = env.exporter
    host = e.listen_address
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    fix = ("start it: systemctl start nova-rdt-exporter "
           "(etc/systemd/nova-rdt-exporter.service), or "
           + _with_files("nova-rdt exporter", env))
    web = None
    if e.web_config_file:
        from nova_rdt.web import webconfig

        try:
            web = webconfig.load(e.web_config_file)
        except webconfig.WebConfigError as err:
            return fail(f"[rdt_exporter] web_config_file: {err}; the "
                        "exporter refuses to start with it.",
                        "correct the web config (doc: Exporter, TLS and "
                        "basic auth)")
    scheme = "https" if web is not None and web.tls else "http"
    url = f"{scheme}://{host}:{e.port}/metrics"
    context = None
    if scheme == "https":
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=3,
                                    context=context) as resp:
            body = resp.read(1 << 20).decode(errors="replace")
    except urllib.error.HTTPError as err:
        challenge = err.headers.get("WWW-Authenticate", "")
        if err.code == 401 and web is not None and web.users and \
                challenge.startswith("Basic"):
            return ok(f"the exporter answers at {url} (basic auth: 401 "
                      "without a password, as its web config asks).")
        return fail(f"{url} answers {err.code} {err.reason}.",
                    f"is another service on port {e.port}? " + fix)
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        return fail(f"the exporter does not answer at {url} ({reason}).",
                    fix)
    if "nova_rdt_" not in body:
        return fail(f"{url} answers, but not with nova-rdt's metrics.",
                    f"is another service on port {e.port}? " + fix)
    return ok(f"the exporter answers at {url}.")


def _files(env: Env) -> str:
    return ", ".join(env.config_files) or "(no config file)"


def _with_files(command: str, env: Env) -> str:
    """``command`` as the operator would re-run it: with the files this
    check read, unless they are Nova's default ones."""
    if env.default_files:
        return command
    if not env.config_files:
        return command + " --no-config-files"
    return " ".join([command] + [f"--config-file {f}"
                                 for f in env.config_files])


def _filters_file() -> str:
    """Where nova-rdt's rootwrap filter is: the copy installed with the
    package (setup.cfg's data_files), else the source tree's path."""
    installed = os.path.join(sys.prefix, "etc", "nova", "rootwrap.d",
                             "nova-rdt.filters")
    if os.path.isfile(installed):
        return installed
    return "etc/nova/rootwrap.d/nova-rdt.filters (from nova-rdt's source)"


# (name, check, the role it belongs to), in the order they are shown.
CHECKS = (
    ("nova-rdt driver loadable", check_driver, "compute"),
    ("RDTFilter enabled", check_filters, "scheduler"),
    ("resctrl mounted", check_resctrl, "compute"),
    ("libvirt hook", check_hook, "compute"),
    ("API paste filter", check_paste, "api"),
    ("privsep through rootwrap", check_rootwrap, "compute"),
    ("exporter", check_exporter, "compute"),
)


def infer_roles(compute_driver: str | None, enabled_filters: list[str],
                paste_path: str) -> tuple[str, ...]:
    """The roles this node's configuration gives it: compute when
    nova-compute runs nova-rdt's driver, scheduler when RDTFilter is
    enabled, api when nova-api's paste pipeline has the flavor check."""
    roles = []
    if _uses_paste_filter(paste_path):
        roles.append("api")
    if "RDTFilter" in enabled_filters:
        roles.append("scheduler")
    if compute_driver == DRIVER:
        roles.append("compute")
    return tuple(roles)


def _uses_paste_filter(path: str) -> bool:
    parser = configparser.RawConfigParser(strict=False)
    try:
        if not parser.read(path):
            return False
    except configparser.Error:
        return False
    names = paste_filter_names(parser)
    pipeline = parser.get(PASTE_COMPOSITE, "keystone", fallback="").split()
    return bool(set(names) & set(pipeline))


def role_list(text: str) -> list[str]:
    """``--role`` values: one role or a comma list of them."""
    roles = [r.strip() for r in text.split(",") if r.strip()]
    bad = [r for r in roles if r not in ROLES]
    if bad or not roles:
        raise argparse.ArgumentTypeError(
            f"{text!r}: roles are {', '.join(ROLES)} (repeat --role or "
            "give a comma list)")
    return roles


# -- reading the configuration ---------------------------------------------

def _nova_options(config_files: list[str]):
    """The few Nova options the checks read, from the same files."""
    from oslo_config import cfg

    conf = cfg.ConfigOpts()
    conf.register_opts([cfg.StrOpt("compute_driver"),
                        cfg.StrOpt("rootwrap_config",
                                   default="/etc/nova/rootwrap.conf")])
    conf.register_opts([cfg.MultiStrOpt(
        "available_filters",
        default=["nova.scheduler.filters.all_filters"]),
        cfg.ListOpt("enabled_filters", default=[])],
        group="filter_scheduler")
    conf.register_opt(cfg.StrOpt("api_paste_config",
                                 default="api-paste.ini"), group="wsgi")
    try:
        conf([], project="nova", default_config_files=list(config_files),
             default_config_dirs=[])
    except cfg.Error as e:
        raise common.CliError(str(e)) from None
    return conf


def _has_section(paths: list[str], section: str) -> bool:
    for path in paths:
        parser = configparser.RawConfigParser(strict=False)
        try:
            parser.read(path)
        except configparser.Error:
            continue
        if parser.has_section(section):
            return True
    return False


def read_env(args) -> Env:
    files = common.config_files(args)
    conf = common.load_conf(files)
    nova = _nova_options(files)
    paste = args.api_paste or nova.wsgi.api_paste_config
    if not os.path.isabs(paste):
        # Nova finds a relative api_paste_config beside its config files.
        base = os.path.dirname(files[0]) if files else "/etc/nova"
        paste = os.path.join(base, paste)
    env = Env(
        config_files=files, rdt=conf.rdt, exporter=conf.rdt_exporter,
        exporter_configured=bool(args.exporter) or
        _has_section(files, "rdt_exporter"),
        compute_driver=nova.compute_driver,
        available_filters=list(nova.filter_scheduler.available_filters),
        enabled_filters=list(nova.filter_scheduler.enabled_filters),
        api_paste=paste,
        rootwrap_config=args.rootwrap_config or nova.rootwrap_config,
        python=args.python, hooks_dir=args.hooks_dir,
        settings_path=args.settings_path, conf=conf,
        default_files=not (args.config_file or args.config_dir or
                           args.no_config_files))
    if args.role:
        env.roles = tuple(r for r in ROLES
                          if any(r in given for given in args.role))
        env.roles_from = "--role"
    else:
        inferred = infer_roles(env.compute_driver, env.enabled_filters,
                               env.api_paste)
        env.roles = inferred or ROLES
        env.roles_from = "configuration" if inferred else "nothing"
    return env


# -- the command ------------------------------------------------------------

def register(sub) -> None:
    from nova_rdt.cmd.hook import DEFAULT_HOOKS_DIR
    from nova_rdt.cmd.hook import DEFAULT_SETTINGS

    status = sub.add_parser(
        "status", help="checks of this host's nova-rdt set-up, in the form "
                       "of nova-status")
    status_sub = status.add_subparsers(dest="status_cmd", required=True)
    upgrade = status_sub.add_parser(
        "upgrade", help="check this node's nova-rdt set-up, by role, "
                        "before and after an upgrade (as nova-status "
                        "upgrade check)")
    upgrade.add_argument("check", choices=["check"],
                         help="run the checks (the only action, as for "
                              "nova-status)")
    upgrade.add_argument(
        "--role", action="append", type=role_list, metavar="ROLE[,ROLE]",
        help=f"this node's roles, of {', '.join(ROLES)}; repeatable "
             "(default: read from the configuration: compute_driver = "
             f"{DRIVER} makes a compute, RDTFilter in enabled_filters a "
             "scheduler, the flavor check in the paste pipeline an API "
             "node; when none is configured, every check runs)")
    common.add_config_args(
        upgrade, "[rdt], [DEFAULT] compute_driver, [filter_scheduler] and "
                 "[wsgi]")
    upgrade.add_argument("--json", action="store_true",
                         help="the results as JSON, in oslo.upgradecheck's "
                              "form, with roles, roles_from and "
                              "config_files added")
    common.add_log_arg(upgrade)
    upgrade.add_argument(
        "--python", default=sys.executable, type=common.program,
        help="the interpreter that runs nova-compute (default: this one)")
    upgrade.add_argument("--hooks-dir", default=DEFAULT_HOOKS_DIR,
                         type=common.path,
                         help="libvirt's hooks directory (default: "
                              "%(default)s)")
    upgrade.add_argument("--settings-path", default=DEFAULT_SETTINGS,
                         type=common.path,
                         help="the hook settings file (default: "
                              "%(default)s)")
    upgrade.add_argument("--api-paste", type=common.path,
                         help="api-paste.ini (default: [wsgi] "
                              "api_paste_config)")
    upgrade.add_argument("--rootwrap-config", type=common.path,
                         help="rootwrap.conf (default: [DEFAULT] "
                              "rootwrap_config)")
    upgrade.add_argument("--exporter", action="store_true",
                         help="check the exporter even without an "
                              "[rdt_exporter] section")
    # Whatever stops the checks from running is oslo.upgradecheck's
    # "error", 255, not a usage error (2 is its "failure").
    upgrade.set_defaults(func=run, exit_codes=EXIT_CODES,
                         usage_code=EXIT_ERROR, failure_code=EXIT_ERROR)


def run(args) -> int:
    from oslo_upgradecheck import upgradecheck

    env = read_env(args)
    if not args.json:
        common.say_read(env.config_files)

    def wrap(fn):
        def check(_self):
            try:
                out = fn(env)
            except Exception as e:
                # oslo.upgradecheck's run() turns any exception into
                # 255; so does this command, in one line.
                raise _CheckCrashed(f"check {fn.__name__} failed: "
                                    f"{type(e).__name__}: {e}") from e
            return upgradecheck.Result(upgradecheck.Code(out.code),
                                       out.text())
        return check

    roles = ", ".join(env.roles)

    class Checks(upgradecheck.UpgradeCommands):
        display_title = f"nova-rdt upgrade check results ({roles})"
        _upgrade_checks = tuple((name, wrap(fn))
                                for name, fn, role in CHECKS
                                if role in env.roles)

    # oslo.upgradecheck prints JSON when its CONF says so.
    saved = upgradecheck.CONF
    upgradecheck.CONF = _JsonFlag(args.json)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            code = int(Checks().check())
    finally:
        upgradecheck.CONF = saved
    if args.json:
        doc = json.loads(out.getvalue())
        doc.update(roles=list(env.roles), roles_from=env.roles_from,
                   config_files=env.config_files)
        print(json.dumps(doc))
    else:
        print(f"{common.PROG}: roles: {roles} ({_ROLES_FROM[env.roles_from]})",
              file=sys.stderr)
        sys.stdout.write(out.getvalue())
    return code


_ROLES_FROM = {"--role": "from --role",
               "configuration": "from the configuration",
               "nothing": "none configured: every check runs"}


class _CheckCrashed(exception.NovaRdtError, RuntimeError):
    pass


class _JsonFlag:
    def __init__(self, json_: bool):
        self.command = type("command", (), {"json": json_})()
