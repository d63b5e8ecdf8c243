#!/usr/bin/env bash
# Set up this Debian 12 host and run nova-rdt's main job: `nova-rdt lab`,
# the ONP scenario end to end (Host lab with real libvirtd and OVS-DPDK,
# Nova in-process, the hook, the exporter, a short RFC 2544) on emulated
# RDT, with an HTML report in ./nova-rdt-lab-report.  Extra arguments go
# to `nova-rdt lab` (--scenario onp|mba|cat, --profile, --kernel, --out,
# --short).
#
# The set-up prints a line for each thing it does; the tools' own output
# (apt, pip and build warnings) goes to .venv/setup-host.log, and a
# failing step is shown with its command and output.  The lab's logs go
# to lab.log in its report directory.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! ./tools/setup-host.sh; then
    echo "nova-rdt: set-up failed (above); nothing was run" >&2
    exit 1
fi
exec .venv/bin/nova-rdt lab "$@"
