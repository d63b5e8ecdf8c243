"""Install the libvirt hook: the shim and its resolved settings.

The shim in the repository (``libvirt_hooks/qemu``) is :func:`render_shim`
with the defaults; a test keeps the two equal.
"""

from __future__ import annotations

import os
import shlex
import shutil
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

# libvirt runs "migrate" on the destination of an incoming live migration
# and "restore" before a saved domain (Nova's suspend and resume) comes
# back, both before QEMU starts.  The guest's vCPUs then wait until
# libvirt resumes them, so "started" can write the decided masks before
# they run, but only if it does not return first: done in the
# background, the write landed 180-270 ms after the guest resumed on
# libvirt's own choice of ways.  Those ops leave a marker, named by a
# checksum of the domain's name (never the name: it is not trusted), and
# print nothing, so libvirt keeps the XML.  A marker that outlives a
# failed migration costs the next start of that name one foreground run.
incoming=0
case "$2" in
    migrate|restore|started|release)
        sum=$(printf '%s' "$1" | cksum | cut -d ' ' -f 1)
        marker="$NOVA_RDT_INCOMING/$sum"
        case "$2:$sum" in
            *:) ;;   # no checksum: no marker (the background path)
            migrate:*|restore:*)
                # Best effort: without a marker the start only goes on in
                # the background, as any other.  Never ":" here: a failed
                # redirection of a special built-in ends the shell.
                if [ ! -L "$NOVA_RDT_INCOMING" ] && [ ! -d "$NOVA_RDT_INCOMING" ]; then
                    {{ mkdir -p "$NOVA_RDT_INCOMING" && chmod 0700 "$NOVA_RDT_INCOMING"; }} 2>/dev/null
                fi
                [ -L "$marker" ] || {{ true > "$marker"; }} 2>/dev/null
                exit 0 ;;
            started:*)
                if [ -f "$marker" ] && [ ! -L "$marker" ]; then
                    incoming=1
                    rm -f "$marker"
                fi ;;
            release:*) rm -f "$marker" ;;
        esac ;;
esac
case "$2" in
    started|release|reconnect) ;;
    # prepare runs before libvirt allocates the domain's ways: the hook
    # makes room there for a nova-rdt PMD sharer, so it must have
    # finished.  For any other domain (a Python start, some 160 ms, not
    # worth it) it only matters when a failure may stop the start.
    prepare)
        xml=$(cat)
        case "$xml" in
            *"http://openstack.org/xmlns/libvirt/nova-rdt/"*"pmd-share>true<"*) ;;
            *) [ "$NOVA_RDT_STRICT" = 1 ] || exit 0 ;;
        esac
        printf '%s\n' "$xml" | "$NOVA_RDT_PYTHON" -m nova_rdt.hook.main --settings "$NOVA_RDT_SETTINGS" -- "$@"
        exit $? ;;
    *) exit 0 ;;
esac
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
              settings_path: str = DEFAULT_SETTINGS,
              state_path: str | None = None) -> None:
    for path in (os.path.join(hooks_dir, "qemu.d", "nova-rdt"),
                 settings_path):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    if state_path:
        # The shim's markers of domains arriving (see the shim).
        shutil.rmtree(os.path.join(state_path, "incoming"),
                      ignore_errors=True)
