#!/bin/bash
# Stand-ins for the devstack functions nova-rdt's plugin uses, written
# (not copied) to the behaviour of devstack's own inc/ini-config and
# functions-common, as read at openstack/devstack 493835a6:
#
#   iniget            the option's value; several lines are run together
#   iniget_multiline  every value, space-separated on ONE line
#   iniset            replaces the value in place, or inserts the option
#                     right after the section header; a missing section
#                     is appended after a blank line
#   iniset_multiline  replaces every value of the option (values are
#                     split on whitespace), in the order given
#   iniadd            appends values: what iniget_multiline printed, then
#                     the new ones, through iniset_multiline (duplicates
#                     are kept, as devstack keeps them)
#   inidelete         removes the option's lines from the section
#   ini_has_option    whether the section has the option
#
# A section runs from a line starting "[section]" to the next line
# starting with "[" and holding "]", as devstack's sed ranges do; an option
# line is one that starts with the option's name, blanks, then "=".
# Values are whitespace-collapsed where devstack's unquoted echo collapses
# them.  The service functions only record their call in $FAKE_LOG.
# shellcheck shell=bash

# _ini MODE FILE SECTION OPTION [VALUE...]: one awk pass over FILE.
#   get, getml: print; has: exit 0/1; del, set, add, setml: print the new
#   file (set replaces an existing option's values, add inserts it).
# Values travel through the environment: awk -v would expand backslashes.
_ini() {
    local mode=$1 file=$2 section=$3 option=$4
    shift 4
    local IFS=$'\x1f'
    _INI_SEC="[$section]" _INI_OPT=$option _INI_VALS="$*" awk -v mode="$mode" '
        function is_opt(line) {
            return index(line, opt) == 1 &&
                substr(line, length(opt) + 1) ~ /^[ \t]*=/
        }
        function rest_of(line) {          # after "opt<blanks>=<blanks>"
            line = substr(line, length(opt) + 1)
            sub(/^[ \t]*=[ \t]*/, "", line)
            return line
        }
        function collapse(text) {         # an unquoted echo of it
            gsub(/[ \t\n]+/, " ", text)
            sub(/^ /, "", text); sub(/ $/, "", text)
            return text
        }
        BEGIN {
            sec = ENVIRON["_INI_SEC"]; opt = ENVIRON["_INI_OPT"]
            vals = ENVIRON["_INI_VALS"]
            nv = (vals == "") ? 0 : split(vals, v, "\037")
            edit = (mode == "del" || mode == "set" || mode == "add" ||
                    mode == "setml")
        }
        {
            header = (index($0, sec) == 1)
            # A range opens on the header and closes on the next line that
            # looks like a header (which cannot reopen it), as sed ranges.
            if (inside && !first && $0 ~ /^\[.*\]/) { inside = 0; closed = 1 }
            else closed = 0
            first = 0
            if (!inside && !closed && header) { inside = 1; first = 1 }
            if (inside && !first && is_opt($0)) {
                found = 1
                if (mode == "get") got = got "\n" $0
                else if (mode == "getml") got = got "\n" rest_of($0)
                else if (mode == "del" || mode == "setml") next
                else if (mode == "set") {
                    print substr($0, 1, length($0) - length(rest_of($0))) vals
                    next
                }
            }
            if (!edit) next
            print
            # Insertions follow every line that starts with the header.
            if (header && mode == "add") print opt " = " vals
            if (header && mode == "setml")
                for (i = 1; i <= nv; i++) print opt " = " v[i]
        }
        END {
            if (mode == "get") {
                sub(/^\n/, "", got); sub(/^[^=]*=/, "", got)
                print collapse(got)
            } else if (mode == "getml") print collapse(got)
            else if (mode == "has") exit(found ? 0 : 1)
        }' "$file"
}

_ini_has_section() {
    [[ -f $1 ]] && _INI_SEC="[$2]" awk '
        index($0, ENVIRON["_INI_SEC"]) == 1 { found = 1; exit }
        END { exit !found }' "$1"
}

_ini_rewrite() {          # MODE FILE SECTION OPTION [VALUE...]
    local tmp
    tmp=$(mktemp)
    _ini "$@" > "$tmp"
    cat "$tmp" > "$2"
    rm -f "$tmp"
}

_ini_sudo() {             # devstack's leading -sudo: run as root here too
    [[ ${1:-} == -sudo ]]
}

iniget() {
    _ini get "$1" "$2" "$3"
}

iniget_multiline() {
    _ini getml "$1" "$2" "$3"
}

ini_has_option() {
    _ini_sudo "$@" && shift
    _ini has "$1" "$2" "$3"
}

inidelete() {
    _ini_sudo "$@" && shift
    [[ -z $2 || -z $3 ]] && return 0
    [[ -f $1 ]] || { echo "sed: can't read $1" >&2; return 2; }
    _ini_rewrite del "$1" "$2" "$3"
}

iniset() {
    _ini_sudo "$@" && shift
    local file=$1 section=$2 option=$3
    local value
    # shellcheck disable=SC2086,SC2116  # devstack's echo collapses blanks
    value=$(echo $4)
    [[ -z $section || -z $option ]] && return 0
    if ! _ini_has_section "$file" "$section"; then
        printf '\n[%s]\n' "$section" >> "$file"
    fi
    if ini_has_option "$file" "$section" "$option"; then
        _ini_rewrite set "$file" "$section" "$option" "$value"
    else
        _ini_rewrite add "$file" "$section" "$option" "$value"
    fi
}

iniset_multiline() {
    _ini_sudo "$@" && shift
    local file=$1 section=$2 option=$3
    shift 3
    local values=()
    # shellcheck disable=SC2206  # devstack splits the values on blanks
    values=($*)
    if ! _ini_has_section "$file" "$section"; then
        printf '\n[%s]\n' "$section" >> "$file"
    fi
    _ini_rewrite setml "$file" "$section" "$option" "${values[@]}"
}

iniadd() {
    _ini_sudo "$@" && shift
    local file=$1 section=$2 option=$3
    shift 3
    local current
    current=$(iniget_multiline "$file" "$section" "$option")
    # shellcheck disable=SC2086
    iniset_multiline "$file" "$section" "$option" $current "$@"
}

is_service_enabled() {
    local s
    for s in "$@"; do
        [[ ,$ENABLED_SERVICES, == *,$s,* ]] && return 0
        [[ $s == nova && ,$ENABLED_SERVICES == *,n-* ]] && return 0
    done
    return 1
}

enable_service() {
    local s
    for s in "$@"; do
        is_service_enabled "$s" || ENABLED_SERVICES="$ENABLED_SERVICES,$s"
    done
}

# devstack's define_plugin is a no-op kept for external tools.
define_plugin() { echo "define_plugin $*" >> "$FAKE_LOG"; }
setup_develop() { echo "setup_develop $*" >> "$FAKE_LOG"; }
pip_uninstall() { echo "pip_uninstall $*" >> "$FAKE_LOG"; }
restart_service() { echo "restart_service $*" >> "$FAKE_LOG"; }
# run_process/stop_process act only for an enabled service, as devstack's.
run_process() {
    is_service_enabled "$1" && echo "run_process $1 $2" >> "$FAKE_LOG"
    return 0
}
stop_process() {
    is_service_enabled "$1" && echo "stop_process $1" >> "$FAKE_LOG"
    return 0
}
