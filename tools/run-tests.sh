#!/usr/bin/env bash
# Set up this Debian 12 host (see setup-host.sh) and run the whole suite.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup-host.sh
exec .venv/bin/python -m pytest -q tests "$@"
