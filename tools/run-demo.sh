#!/usr/bin/env bash
# Set up this Debian 12 host and run nova-rdt's main job: `nova-rdt lab`,
# the ONP scenario end to end (Host lab with real libvirtd and OVS-DPDK,
# Nova in-process, the hook, the exporter, a short RFC 2544) on emulated
# RDT, with an HTML report in ./nova-rdt-lab-report.  Extra arguments go
# to `nova-rdt lab` (--scenario onp|mba|cat, --profile, --out, --short).
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup-host.sh
exec .venv/bin/nova-rdt lab "$@"
