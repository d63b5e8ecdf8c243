#!/usr/bin/env bash
# Set up this Debian 12 host and run nova-rdt's main job: `nova-rdt lab`,
# the ONP scenario end to end (Host lab with real libvirtd and OVS-DPDK,
# Nova in-process, the hook, the exporter, a short RFC 2544) on emulated
# RDT, with an HTML report in ./nova-rdt-lab-report.  Extra arguments go
# to `nova-rdt lab` (--scenario onp|mba|cat, --profile, --kernel, --out,
# --short).
#
# The set-up's own output (apt, pip and its build warnings) goes to
# .venv/setup-host.log, shown only if the set-up fails; the lab's logs go
# to lab.log in its report directory.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .venv
log=.venv/setup-host.log
echo "nova-rdt: setting up this host (log: $log)"
if ! ./tools/setup-host.sh >"$log" 2>&1; then
    cat "$log" >&2
    echo "nova-rdt: set-up failed; the log above is in $log" >&2
    exit 1
fi
exec .venv/bin/nova-rdt lab "$@"
