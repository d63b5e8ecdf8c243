#!/usr/bin/env bash
# Set up this Debian 12 host (see setup-host.sh) and run the whole suite.
# Extra arguments go to pytest, e.g. one test:
#   ./tools/run-tests.sh --no-setup tests/unit/test_cbm.py -k contiguous
# --no-setup skips the set-up (apt, pip) when you know .venv is current;
# without it the set-up still returns in about a second when nothing
# changed since its last run.
set -euo pipefail
cd "$(dirname "$0")/.."
setup=1
if [ "${1:-}" = "--no-setup" ]; then
    setup=0
    shift
fi
if [ "$setup" = 1 ]; then
    ./tools/setup-host.sh
elif [ ! -x .venv/bin/python ]; then
    echo "run-tests: no .venv yet; run without --no-setup once" >&2
    exit 2
fi
if [ $# -eq 0 ]; then
    set -- tests
fi
exec .venv/bin/python -m pytest -q "$@"
