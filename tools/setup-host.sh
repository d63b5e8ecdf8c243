#!/usr/bin/env bash
# Idempotent set-up of a Debian 12 host for nova-rdt: Debian packages, a
# virtualenv in .venv and the package installed into it.  Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

# libvirt-daemon brings /usr/share/libvirt/schemas, against which the
# Nova functional tests validate the domain XML the driver writes.  The
# Host lab (nova_rdt.lab) runs libvirtd with QEMU, OVS-DPDK and testpmd
# (dpdk-dev) for real.  The exporter's tests scrape it with a real
# Prometheus, load its page in a real headless Chromium and read its
# notifications from a real RabbitMQ.
packages=(python3 python3-venv python3-dev git fuse3 libfuse3-3 util-linux
          mount procps iproute2 libvirt-daemon libvirt-daemon-driver-qemu
          libvirt-clients qemu-system-x86 openvswitch-switch-dpdk dpdk-dev
          gcc prometheus chromium rabbitmq-server shellcheck)
missing=()
# One dpkg-query for all: the fast path when everything is installed.
installed=$(dpkg-query -W -f='${Package} ${Status}\n' "${packages[@]}" \
            2>/dev/null | awk '$NF == "installed" {print $1}')
for p in "${packages[@]}"; do
    grep -qx "$p" <<<"$installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "setup-host: need root to install: ${missing[*]}" >&2
        exit 1
    fi
    echo "setup-host: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # The lab starts its own daemons in a temp dir: keep the packages'
    # init scripts from starting host-wide ones (and from failing the
    # install where there is no init system).
    policy=/usr/sbin/policy-rc.d
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' > "$policy"
        chmod +x "$policy"
        trap 'rm -f "$policy"' EXIT
    fi
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Debian's interpreter, not whatever python3 comes first on PATH.
PY=/usr/bin/python3
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
stamp=.venv/.nova-rdt-installed
deps_stamp=.venv/.nova-rdt-deps
if [ ! -f "$deps_stamp" ] || [ setup.cfg -nt "$deps_stamp" ] \
        || [ requirements.txt -nt "$deps_stamp" ] \
        || [ test-requirements.txt -nt "$deps_stamp" ]; then
    echo "setup-host: installing Python packages into .venv"
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q -r requirements.txt -r test-requirements.txt
    touch "$deps_stamp"
    rm -f "$stamp"
fi
# A regular (not editable) install: the nova.virt.rdt shim must land inside
# Nova's package, which editable finders cannot do.  Re-install whenever a
# source file is newer than the last install.
if [ ! -f "$stamp" ] || [ -n "$(find nova_rdt nova tempest_plugin \
        libvirt_hooks etc -newer "$stamp" -print -quit 2>/dev/null)" ]; then
    # pip's build chatter (setuptools deprecation notices) goes to a log;
    # it is shown only if the install fails.
    log=.venv/nova-rdt-install.log
    # A stale build/lib would carry deleted modules into site-packages.
    rm -rf build
    if ! .venv/bin/pip install -q --no-deps . >"$log" 2>&1; then
        cat "$log" >&2
        exit 1
    fi
    touch "$stamp"
fi
# The RFC 2544 engine's compiled sender (nova-rdt-pktgen), into .venv/bin;
# rebuilt only when its source is newer.
./tools/build-native.sh .venv/bin
# The lab's Linux guest (Debian's cloud kernel and busybox in an
# initramfs, extracted, never installed on this host).  Not fatal: the
# guest tests skip, saying why, when it cannot be built (no network).
./tools/build-guest-image.sh \
    || echo "setup-host: the lab's guest image was not built" >&2
