#!/usr/bin/env bash
# Set up this Debian 12 host and run nova-rdt's main job: an emulated
# 2-socket Xeon Gold 6252 mounted at /sys/fs/resctrl in a private mount
# namespace, shown by `nova-rdt host show`.  Nothing outside that
# namespace changes.  Extra arguments go to `nova-rdt emulate`.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup-host.sh
exec .venv/bin/nova-rdt emulate --profile gold-6252 --namespace "$@" -- \
    .venv/bin/nova-rdt host show
