#!/bin/bash
# A minimal stand-in for the devstack functions nova-rdt's plugin uses,
# written to devstack's documented behaviour (inc/ini-config, functions-
# common): enough to run plugin.sh's phases against temp files.
# shellcheck shell=bash
# shellcheck disable=SC2086  # "$range" is "start end": split on purpose

_ini_section_range() {   # file section -> "start end" line numbers, or ""
    awk -v s="[$2]" '
        $0 == s { start = NR; next }
        start && /^\[/ { print start, NR - 1; found = 1; exit }
        END { if (start && !found) print start, NR }' "$1"
}

iniget() {               # file section option -> first value
    local range
    range=$(_ini_section_range "$1" "$2")
    [[ -z $range ]] && return 0
    set -- "$1" "$3" $range
    sed -n "$(( $3 + 1 )),$4p" "$1" | \
        sed -n "s/^$2[ \t]*=[ \t]*//p" | head -n 1
}

iniget_multiline() {     # file section option -> every value, one per line
    local range
    range=$(_ini_section_range "$1" "$2")
    [[ -z $range ]] && return 0
    set -- "$1" "$3" $range
    sed -n "$(( $3 + 1 )),$4p" "$1" | sed -n "s/^$2[ \t]*=[ \t]*//p"
}

inidelete() {            # file section option: drop every line of it
    local range
    [[ -f $1 ]] || return 0
    range=$(_ini_section_range "$1" "$2")
    [[ -z $range ]] && return 0
    set -- "$1" "$3" $range
    sed -i "$(( $3 + 1 )),$4{/^$2[ \t]*=/d}" "$1"
}

iniset_multiline() {     # file section option value...: one line each
    local file=$1 section=$2 option=$3
    shift 3
    touch "$file"
    inidelete "$file" "$section" "$option"
    if [[ -z $(_ini_section_range "$file" "$section") ]]; then
        printf '\n[%s]\n' "$section" >> "$file"
    fi
    local range end v lines=""
    for v in "$@"; do lines+="$option = $v"$'\n'; done
    [[ -z $lines ]] && return 0
    range=$(_ini_section_range "$file" "$section")
    end=${range#* }
    local tmp
    tmp=$(mktemp)
    { head -n "$end" "$file"; printf '%s' "$lines"; tail -n +"$(( end + 1 ))" "$file"; } > "$tmp"
    cat "$tmp" > "$file"
    rm -f "$tmp"
}

iniset() {               # file section option value: replace or add
    local file=$1 section=$2 option=$3 value=$4
    touch "$file"
    local range
    range=$(_ini_section_range "$file" "$section")
    if [[ -n $range ]] && [[ -n $(iniget_multiline "$file" "$section" "$option") ]]; then
        set -- $range
        local esc=${value//\\/\\\\}
        esc=${esc//&/\\&}
        esc=${esc//|/\\|}
        sed -i "$(( $1 + 1 )),$2s|^${option}[ \t]*=.*|$option = $esc|" "$file"
        return 0
    fi
    iniset_multiline "$file" "$section" "$option" "$value"
}

is_service_enabled() {
    local s
    for s in "$@"; do
        [[ ,$ENABLED_SERVICES, == *,$s,* ]] && return 0
    done
    return 1
}

enable_service() {
    local s
    for s in "$@"; do
        is_service_enabled "$s" || ENABLED_SERVICES="$ENABLED_SERVICES,$s"
    done
}

pip_install() { echo "pip_install $*" >> "$FAKE_LOG"; }
pip_uninstall() { echo "pip_uninstall $*" >> "$FAKE_LOG"; }
restart_service() { echo "restart_service $*" >> "$FAKE_LOG"; }
