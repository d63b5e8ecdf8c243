#!/usr/bin/env bash
# Idempotent set-up of a Debian 12 host for nova-rdt: Debian packages, a
# virtualenv in .venv and the package installed into it.  Run as root.
#
# It prints one line for each thing it does (what it installs, builds or
# refreshes) and nothing when there is nothing to do.  The tools' own
# output (apt-get, pip, the compiler) goes to $NOVA_RDT_SETUP_LOG
# (default .venv/setup-host.log); when a step fails, its command, exit
# status and output are printed and the script exits with that status.
#
#   tools/setup-host.sh [--packages-only]
#
# --packages-only stops after the Debian packages.
set -euo pipefail
cd "$(dirname "$0")/.."
packages_only=0
case "${1:-}" in
    "") ;;
    --packages-only) packages_only=1 ;;
    *) echo "usage: tools/setup-host.sh [--packages-only]" >&2; exit 2 ;;
esac
mkdir -p .venv
# One set-up at a time (the demo, the suite and a second shell may all
# start one): pip and apt must not run twice into the same place.
exec 9>>.venv/.setup-host.lock
flock 9
log=${NOVA_RDT_SETUP_LOG:-.venv/setup-host.log}
: >"$log"

say() { echo "setup-host: $*"; }

# Runs one step with its output in the log.  A failure is never silent:
# the command, its exit status and the tail of its output go to stderr.
run() {
    local out rc=0
    out=$(mktemp)
    printf '$ %s\n' "$*" >>"$log"
    "$@" >"$out" 2>&1 || rc=$?
    cat "$out" >>"$log"
    if [ "$rc" -ne 0 ]; then
        {
            echo "setup-host: this step failed with exit status $rc:"
            echo "  \$ $*"
            tail -n 40 "$out" | sed 's/^/  | /'
            echo "setup-host: the whole log is in $log"
        } >&2
        rm -f "$out"
        exit "$rc"
    fi
    rm -f "$out"
}

# libvirt-daemon brings /usr/share/libvirt/schemas, against which the
# Nova functional tests validate the domain XML the driver writes.  The
# Host lab (nova_rdt.lab) runs libvirtd with QEMU, OVS-DPDK and testpmd
# (dpdk-dev) for real.  The exporter's tests scrape it with a real
# Prometheus, load its page in a real headless Chromium and read its
# notifications from a real RabbitMQ.  The lab's cloud scenario runs
# MariaDB, and the APIs under uWSGI, as devstack does; nova-compute
# starts privsep through sudo, and libvirt-python builds against
# libvirt-dev; Nova reads images with qemu-img.  Keep in step with bindep.txt
# (tests/unit/test_setup_host.py checks it).
packages=(python3 python3-venv python3-dev git fuse3 libfuse3-3 util-linux
          mount procps iproute2 libvirt-daemon libvirt-daemon-driver-qemu
          libvirt-clients qemu-system-x86 openvswitch-switch-dpdk dpdk-dev
          gcc prometheus chromium rabbitmq-server shellcheck
          mariadb-server uwsgi-core uwsgi-plugin-python3 sudo libvirt-dev
          pkg-config qemu-utils)

# The packages of "$@" that are not installed.  dpkg-query exits 1 when
# any name is unknown to dpkg (never installed), which is exactly the
# case to handle, so its status is ignored and only what it prints is
# read: a package counts as installed when its status ends in
# "installed" ("install ok installed", "hold ok installed").
missing_packages() {
    local listed
    listed=$( { dpkg-query -W -f='${Package} ${Status}\n' "$@" 2>/dev/null \
                || true; } | awk '$NF == "installed" {print $1}')
    local p
    for p in "$@"; do
        grep -qxF "$p" <<<"$listed" || echo "$p"
    done
}

mapfile -t missing < <(missing_packages "${packages[@]}")
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "setup-host: need root to install: ${missing[*]}" >&2
        exit 1
    fi
    say "installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # The lab starts its own daemons in a temp dir: keep the packages'
    # init scripts from starting host-wide ones (and from failing the
    # install where there is no init system).
    policy=${NOVA_RDT_POLICY_RC_D:-/usr/sbin/policy-rc.d}
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' > "$policy"
        chmod +x "$policy"
        trap 'rm -f "$policy"' EXIT
    fi
    run apt-get update -qq
    run apt-get install -y -qq --no-install-recommends "${missing[@]}"
    # apt-get can exit 0 and still leave a package out (a held package,
    # a name that only resolves as virtual); say which, rather than fail
    # later on a missing command.
    mapfile -t still < <(missing_packages "${missing[@]}")
    if [ ${#still[@]} -gt 0 ]; then
        echo "setup-host: apt-get did not install: ${still[*]} (log: $log)" >&2
        exit 1
    fi
fi

[ "$packages_only" = 1 ] && exit 0

# Debian's interpreter, not whatever python3 comes first on PATH.
PY=/usr/bin/python3
if [ ! -x .venv/bin/python ]; then
    say "making the virtualenv .venv"
    run "$PY" -m venv .venv
fi
stamp=.venv/.nova-rdt-installed
deps_stamp=.venv/.nova-rdt-deps
if [ ! -f "$deps_stamp" ] || [ setup.cfg -nt "$deps_stamp" ] \
        || [ requirements.txt -nt "$deps_stamp" ] \
        || [ test-requirements.txt -nt "$deps_stamp" ]; then
    say "installing Python packages into .venv"
    run .venv/bin/pip install -q --upgrade pip
    run .venv/bin/pip install -q -r requirements.txt -r test-requirements.txt
    touch "$deps_stamp"
    rm -f "$stamp"
fi
# A regular (not editable) install: the nova.virt.rdt shim must land inside
# Nova's package, which editable finders cannot do.  Re-install whenever a
# source file is newer than the last install.
if [ ! -f "$stamp" ] || [ -n "$(find nova_rdt nova tempest_plugin \
        libvirt_hooks etc -newer "$stamp" -print -quit 2>/dev/null)" ]; then
    say "installing nova-rdt into .venv"
    # A stale build/lib would carry deleted modules into site-packages.
    rm -rf build
    run .venv/bin/pip install -q --no-deps .
    touch "$stamp"
fi
# The RFC 2544 engine's compiled sender (nova-rdt-pktgen), into .venv/bin;
# rebuilt only when its source is newer.
run ./tools/build-native.sh .venv/bin
# The lab's Linux guest (Debian's cloud kernel and busybox in an
# initramfs, extracted, never installed on this host).  Not fatal: the
# guest tests skip, saying why, when it cannot be built (no network).
if ! ./tools/build-guest-image.sh >>"$log" 2>&1; then
    echo "setup-host: the lab's guest image was not built (see $log)" >&2
fi
