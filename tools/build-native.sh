#!/bin/bash
# Builds nova-rdt's compiled parts from the repository: today the
# software RFC 2544 generator's send path, nova-rdt-pktgen, from
# nova_rdt/rfc2544/generators/native/pktgen.c.
#
#   tools/build-native.sh [BINDIR]
#
# BINDIR defaults to $NOVA_RDT_NATIVE_BINDIR, else the venv's bin
# (.venv/bin), where the installed package looks for it (see
# nova_rdt/rfc2544/generators/pktgen.py; $NOVA_RDT_PKTGEN names the
# binary outright).  Idempotent: builds only when the source (or this
# script) is newer than the binary; the binary is renamed into place, so
# a concurrent run never sees half a file.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
src=$top/nova_rdt/rfc2544/generators/native/pktgen.c
hdr=$top/nova_rdt/rfc2544/generators/native/pacer.h
bindir=${1:-${NOVA_RDT_NATIVE_BINDIR:-$top/.venv/bin}}
out=$bindir/nova-rdt-pktgen

if [ -x "$out" ] && [ "$out" -nt "$src" ] && [ "$out" -nt "$hdr" ] &&
   [ "$out" -nt "$0" ]; then
    # Up to date: say nothing, as the rest of the set-up does.
    exit 0
fi
if ! command -v "${CC:-gcc}" >/dev/null; then
    echo "build-native: no C compiler (${CC:-gcc}); apt-get install gcc" >&2
    exit 1
fi
mkdir -p "$bindir"
tmp=$(mktemp "$bindir/.nova-rdt-pktgen.XXXXXX")
trap 'rm -f "$tmp"' EXIT
"${CC:-gcc}" -O2 -g -Wall -Wextra -Werror -std=gnu11 -pthread -o "$tmp" "$src"
chmod 0755 "$tmp"
mv -f "$tmp" "$out"
trap - EXIT
echo "build-native: built $out"
