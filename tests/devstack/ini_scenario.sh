#!/bin/bash
# ini_scenario.sh FUNCTIONS: the ini functions' behaviour the plugin relies
# on, printed.  Sourcing devstack's own inc/ini-config or the stand-ins in
# tests/devstack/functions.sh must print the same.
# shellcheck shell=bash
# shellcheck disable=SC1090  # the functions file is an argument
set -o errexit
source "$1"
f=$(mktemp)
trap 'rm -f "$f" "$f.new"' EXIT
printf '%s\n' '[DEFAULT]' 'debug = True' '' '[filter_scheduler]' \
    'enabled_filters = A,B' 'available_filters = x' \
    'available_filters   =  y  z' '[composite:api]' \
    'keystone = a b keystonecontext app' > "$f"
echo "iniget: [$(iniget "$f" filter_scheduler available_filters)]"
echo "iniget_multiline: [$(iniget_multiline "$f" filter_scheduler available_filters)]"
echo "absent: [$(iniget_multiline "$f" filter_scheduler nope)]"
iniadd "$f" filter_scheduler available_filters new1
iniadd "$f" filter_scheduler available_filters new1
echo "after iniadd twice: [$(iniget_multiline "$f" filter_scheduler available_filters)]"
grep -n available_filters "$f"
iniset "$f" DEFAULT compute_driver 'rdt.X'
iniset "$f" DEFAULT compute_driver 'rdt.Y   two&\1'
iniset "$f" rdt classes 'a:b=1'
iniset_multiline "$f" rdt classes p q r
iniset_multiline "$f" newsec opt v1 v2
iniset "$f" composite:api keystone "a b keystonecontext rdt app"
echo "pipeline: [$(iniget "$f" composite:api keystone)]"
inidelete "$f" filter_scheduler enabled_filters
iniset_multiline "$f" filter_scheduler available_filters
inidelete "$f" rdt nope
iniset "$f" DEFAULT debug False
if ini_has_option "$f" rdt classes; then echo "has classes"; fi
if ! ini_has_option "$f" rdt nope; then echo "no nope"; fi
cat "$f"
iniset "$f.new" sec o v
cat "$f.new"
