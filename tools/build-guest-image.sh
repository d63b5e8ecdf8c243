#!/bin/bash
# Builds the lab's guest image (nova_rdt/lab/guest) from Debian packages,
# without installing anything on the host: linux-image-cloud-amd64
# (resolved to the versioned package it depends on), busybox-static,
# dpdk-dev (for dpdk-testpmd), memtester and every library package their
# ELF files need (nova_rdt.lab.guest.userland follows DT_NEEDED) are
# fetched with apt-get download and only unpacked (dpkg-deb -x) in a
# scratch directory; the noisy role's stressor is compiled static.
#
#   tools/build-guest-image.sh [OUTDIR]
#
# OUTDIR defaults to $NOVA_RDT_GUEST_DIR, else .venv/share/nova-rdt/guest
# (where nova_rdt.lab.guest.image looks).  Idempotent and quiet when the
# image is current: same kernel package, and no input newer than it.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-${NOVA_RDT_GUEST_DIR:-$top/.venv/share/nova-rdt/guest}}
PY=${PYTHON:-$top/.venv/bin/python}
src=$top/nova_rdt/lab/guest
manifest=$out/manifest.json

say() { echo "build-guest-image: $*" >&2; }

# The versioned kernel package the meta-package points at today.
kpkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null \
       | awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ {print $2; exit}')
if [ -z "$kpkg" ]; then
    # Stale or missing package lists: refresh once.
    apt-get update -qq
    kpkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null \
           | awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ {print $2; exit}')
fi
if [ -z "$kpkg" ]; then
    say "cannot resolve linux-image-cloud-amd64 to a kernel package (apt-cache depends)"
    exit 1
fi

current=1
if [ ! -f "$manifest" ] || ! grep -q "\"kernel_package\": \"$kpkg\"" "$manifest"; then
    current=0
elif [ -n "$(find "$0" "$src" -newer "$manifest" \
             \( -name '*.py' -o -name '*.c' -o -name '*.sh' \) -print -quit)" ]; then
    current=0
fi
[ $current = 1 ] && exit 0

for tool in gcc dpkg-deb apt-get; do
    if ! command -v $tool >/dev/null; then
        say "$tool not found (apt-get install ${tool/dpkg-deb/dpkg})"
        exit 1
    fi
done
if [ ! -x "$PY" ]; then
    say "no Python at $PY (run tools/setup-host.sh, or set PYTHON)"
    exit 1
fi

scratch=$(mktemp -d /tmp/nova-rdt-guest-build.XXXXXX)
chmod 0755 "$scratch"
trap 'rm -rf "$scratch"' EXIT
mkdir "$scratch/debs" "$scratch/root"
# apt's _apt user must be able to write the download directory.
chmod 0777 "$scratch/debs"
download() {
    (cd "$scratch/debs" && apt-get download -qq "$kpkg" busybox-static) \
        >"$scratch/download.log" 2>&1
}
if ! download; then
    # The package lists may name versions the mirror no longer has.
    apt-get update -qq
    if ! download; then
        cat "$scratch/download.log" >&2
        say "apt-get download $kpkg busybox-static failed"
        exit 1
    fi
fi
for deb in "$scratch"/debs/*.deb; do
    dpkg-deb -x "$deb" "$scratch/root"
done
# testpmd, memtester and their shared libraries (and only those: the
# initramfs gets what the programs reach, not whole packages).
if ! (cd "$top" && "$PY" -m nova_rdt.lab.guest.userland fetch \
        --root "$scratch/root" --debs "$scratch/debs") \
        >"$scratch/userland.log" 2>&1; then
    cat "$scratch/userland.log" >&2
    say "fetching testpmd and memtester (apt-get download) failed"
    exit 1
fi
"${CC:-gcc}" -O2 -static -Wall -Wextra -Werror -std=gnu11 \
    -o "$scratch/nova-rdt-stress" "$src/stressor.c"
cd "$top"
"$PY" -m nova_rdt.lab.guest.image assemble --root "$scratch/root" \
    --stressor "$scratch/nova-rdt-stress" --init "$src/init.sh" \
    --kernel-package "$kpkg" "$out" >/dev/null
say "built $out ($kpkg)"
