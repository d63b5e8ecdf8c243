#!/usr/bin/env bash
# Idempotent set-up of a Debian 12 host for nova-rdt: Debian packages, a
# virtualenv in .venv and the package installed into it.  Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(python3 python3-venv python3-dev git fuse3 libfuse3-3 util-linux
          mount)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" \
        || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "setup-host: need root to install: ${missing[*]}" >&2
        exit 1
    fi
    echo "setup-host: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Debian's interpreter, not whatever python3 comes first on PATH.
PY=/usr/bin/python3
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
stamp=.venv/.nova-rdt-installed
if [ ! -f "$stamp" ] || [ setup.cfg -nt "$stamp" ] \
        || [ requirements.txt -nt "$stamp" ] \
        || [ test-requirements.txt -nt "$stamp" ]; then
    echo "setup-host: installing Python packages into .venv"
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q -r requirements.txt -r test-requirements.txt
    .venv/bin/pip install -q -e .
    touch "$stamp"
fi
