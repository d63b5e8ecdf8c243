"""Install the libvirt hook: the shim and its resolved settings.

The shim in the repository (``libvirt_hooks/qemu``) is :func:`render_shim`
with the defaults; a test keeps the two equal.
"""

from __future__ import annotations

import os
import shlex
import sys

from nova_rdt.host.settings import HookSettings

DEFAULT_HOOKS_DIR = "/etc/libvirt/hooks"
DEFAULT_SETTINGS = "/etc/nova-rdt/hook.json"

_SHIM = """\
#!/bin/sh
# nova-rdt's libvirt QEMU hook shim.  Install with `nova-rdt hook install`,
# which fills in the interpreter and the settings file below.  libvirt
# runs it as root with: DOMAIN-NAME OPERATION SUB-OPERATION EXTRA and the
# domain XML on stdin.  Arguments are passed on quoted and never
# evaluated: domain names are not trusted.
NOVA_RDT_PYTHON={python}
NOVA_RDT_SETTINGS={settings}
NOVA_RDT_STRICT={strict}
NOVA_RDT_INCOMING={incoming}

# A domain's marker: a hash of its name, never the name itself.
marker="$NOVA_RDT_INCOMING/$(printf '%s' "$1" | md5sum | cut -c1-32)"
case "$2" in
    # libvirt runs "migrate" on the destination of an incoming migration
    # only, before QEMU starts there.  The guest's vCPUs then wait for
    # the Finish phase, so "started" can write the decided masks before
    # they run, but only if it does not return first: done in the
    # background, the write landed 180-270 ms after the guest resumed on
    # libvirt's own choice of ways.  No output: the XML is kept.
    migrate) mkdir -p "$NOVA_RDT_INCOMING" && : > "$marker"; exit 0 ;;
    started|release|reconnect) ;;
    # prepare only matters when a failure may stop the start.
    prepare) [ "$NOVA_RDT_STRICT" = 1 ] || exit 0 ;;
    *) exit 0 ;;
esac
incoming=0
if [ -e "$marker" ]; then
    [ "$2" = started ] && incoming=1
    [ "$2" = started ] || [ "$2" = release ] && rm -f "$marker"
fi
if [ "$NOVA_RDT_STRICT" = 1 ] || [ $incoming = 1 ]; then
    exec "$NOVA_RDT_PYTHON" -m nova_rdt.hook.main --settings "$NOVA_RDT_SETTINGS" -- "$@"
fi
# Not strict: never delay the domain.  The work goes on in the background
# (it takes the resctrl lock itself); libvirt waits for our output pipes,
# so they are closed.  A background job's stdin would be /dev/null: the
# XML is handed over on fd 3.  Niced, so that on a busy host it yields the
# CPU to the QEMU that is starting.
exec 3<&0
nice -n 10 "$NOVA_RDT_PYTHON" -m nova_rdt.hook.main --settings "$NOVA_RDT_SETTINGS" -- "$@" <&3 >/dev/null 2>&1 3<&- &
exit 0
"""


def render_shim(python: str = "/usr/bin/python3",
                settings: str = DEFAULT_SETTINGS,
                strict: bool = False,
                state_path: str = "/var/lib/nova-rdt") -> str:
    return _SHIM.format(python=shlex.quote(python),
                        settings=shlex.quote(settings),
                        strict=1 if strict else 0,
                        incoming=shlex.quote(
                            os.path.join(state_path, "incoming")))


def install(settings: HookSettings, hooks_dir: str = DEFAULT_HOOKS_DIR,
            settings_path: str = DEFAULT_SETTINGS,
            python: str | None = None) -> str:
    """Write settings and shim; returns the shim's path.

    The shim goes to ``qemu.d/nova-rdt`` so that an operator's own
    ``qemu`` hook is left alone; libvirt runs every executable there.
    libvirtd only looks for hooks when it starts: restart it after the
    first install.
    """
    os.makedirs(os.path.dirname(settings_path), exist_ok=True)
    settings.dump(settings_path)
    target_dir = os.path.join(hooks_dir, "qemu.d")
    os.makedirs(target_dir, exist_ok=True)
    path = os.path.join(target_dir, "nova-rdt")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(render_shim(python or sys.executable, settings_path,
                            settings.hook_strict, settings.state_path))
    os.chmod(tmp, 0o755)
    os.replace(tmp, path)
    return path


def uninstall(hooks_dir: str = DEFAULT_HOOKS_DIR,
              settings_path: str = DEFAULT_SETTINGS) -> None:
    for path in (os.path.join(hooks_dir, "qemu.d", "nova-rdt"),
                 settings_path):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
