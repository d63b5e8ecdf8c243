#!/bin/bash
# nova-rdt devstack plugin: enable with
#
#   enable_plugin nova-rdt https://opendev.example.org/nova-rdt
#
# devstack sources this file with the phase as arguments.  Every phase is
# idempotent: running it twice leaves the same files.
# shellcheck shell=bash
# shellcheck disable=SC2154  # devstack's globals: DEST, NOVA_CONF, ...

function _nova_rdt_bin {
    # nova-rdt lands beside Nova's own commands.
    local bin=${NOVA_BIN_DIR:-/usr/local/bin}/nova-rdt
    if [[ -x $bin ]]; then
        echo "$bin"
    else
        command -v nova-rdt
    fi
}

# Add VALUE to a multi-valued option unless it is there already.
function _nova_rdt_iniadd_once {
    local file=$1 section=$2 option=$3 value=$4
    local current
    current=$(iniget_multiline "$file" "$section" "$option")
    if ! grep -qxF -- "$value" <<< "$current"; then
        # shellcheck disable=SC2086  # one value per word, on purpose
        iniset_multiline "$file" "$section" "$option" $current "$value"
    fi
}

function _nova_rdt_pmd_cos {
    if [[ $NOVA_RDT_PMD_COS != auto ]]; then
        echo "$NOVA_RDT_PMD_COS"
    elif is_service_enabled ovs-dpdk || [[ ${OVS_DATAPATH_TYPE:-} == netdev ]]; then
        echo True
    else
        echo False
    fi
}

function install_nova_rdt {
    # A regular install: the compute_driver shim goes inside Nova's package.
    pip_install "$NOVA_RDT_DIR"
}

function configure_nova_rdt {
    iniset "$NOVA_CONF" DEFAULT compute_driver "$NOVA_RDT_DRIVER"
    _nova_rdt_iniadd_once "$NOVA_CONF" filter_scheduler available_filters \
        nova.scheduler.filters.all_filters
    _nova_rdt_iniadd_once "$NOVA_CONF" filter_scheduler available_filters \
        "$NOVA_RDT_FILTER"
    local enabled
    enabled=$(iniget "$NOVA_CONF" filter_scheduler enabled_filters)
    enabled=${enabled:-ComputeFilter,ComputeCapabilitiesFilter,ImagePropertiesFilter,ServerGroupAntiAffinityFilter,ServerGroupAffinityFilter}
    if [[ ,$enabled, != *,RDTFilter,* ]]; then
        enabled="$enabled,RDTFilter"
    fi
    iniset "$NOVA_CONF" filter_scheduler enabled_filters "$enabled"

    iniset "$NOVA_CONF" rdt reserved_host_ways "$NOVA_RDT_RESERVED_HOST_WAYS"
    iniset "$NOVA_CONF" rdt pmd_shared_ways "$NOVA_RDT_PMD_SHARED_WAYS"
    iniset "$NOVA_CONF" rdt pmd_cos "$(_nova_rdt_pmd_cos)"
    iniset "$NOVA_CONF" rdt require_resctrl "$NOVA_RDT_REQUIRE_RESCTRL"
    iniset "$NOVA_CONF" rdt state_path "$NOVA_RDT_STATE_PATH"
    local classes=()
    IFS=';' read -r -a classes <<< "$NOVA_RDT_CLASSES"
    if [[ ${#classes[@]} -gt 0 ]]; then
        iniset_multiline "$NOVA_CONF" rdt classes "${classes[@]}"
    fi
}

function install_nova_rdt_hook {
    local bin
    bin=$(_nova_rdt_bin)
    local first=True
    [[ -e $NOVA_RDT_HOOKS_DIR/qemu.d/nova-rdt ]] && first=False
    sudo "$bin" hook install --config-file "$NOVA_CONF" \
        --hooks-dir "$NOVA_RDT_HOOKS_DIR" \
        --settings-path "$NOVA_RDT_HOOK_SETTINGS"
    # libvirtd looks for hooks only when it starts.
    if [[ $first == True ]] && is_service_enabled n-cpu; then
        restart_service "${LIBVIRT_DAEMON:-libvirtd}"
    fi
    if [[ $(_nova_rdt_pmd_cos) == True ]]; then
        # OVS is configured by now (extra runs after the networking
        # plugins): derive the PMD COS from its pmd-cpu-mask.
        sudo "$bin" pmd sync --config-file "$NOVA_CONF" || \
            echo "nova-rdt: pmd sync failed; nova-compute retries at start"
    fi
}

function configure_tempest_nova_rdt {
    iniset "$TEMPEST_CONFIG" nova_rdt api_validators True
    iniset "$TEMPEST_CONFIG" nova_rdt rdt_compute "$NOVA_RDT_TEMPEST_RDT_COMPUTE"
    iniset "$TEMPEST_CONFIG" nova_rdt generator "$NOVA_RDT_TEMPEST_GENERATOR"
    if [[ -n $NOVA_RDT_TEMPEST_GENERATOR_CONFIG ]]; then
        iniset "$TEMPEST_CONFIG" nova_rdt generator_config \
            "$NOVA_RDT_TEMPEST_GENERATOR_CONFIG"
    fi
    iniset "$TEMPEST_CONFIG" nova_rdt noisy_class \
        "${NOVA_RDT_CLASSES%%:*}"
}

function uninstall_nova_rdt_hook {
    local bin
    bin=$(_nova_rdt_bin) || return 0
    sudo "$bin" hook uninstall --hooks-dir "$NOVA_RDT_HOOKS_DIR" \
        --settings-path "$NOVA_RDT_HOOK_SETTINGS"
}

function cleanup_nova_rdt {
    uninstall_nova_rdt_hook
    if [[ -f $NOVA_CONF ]]; then
        inidelete "$NOVA_CONF" DEFAULT compute_driver
        inidelete "$NOVA_CONF" rdt reserved_host_ways
        inidelete "$NOVA_CONF" rdt pmd_shared_ways
        inidelete "$NOVA_CONF" rdt pmd_cos
        inidelete "$NOVA_CONF" rdt require_resctrl
        inidelete "$NOVA_CONF" rdt state_path
        inidelete "$NOVA_CONF" rdt classes
        local kept enabled
        kept=$(iniget_multiline "$NOVA_CONF" filter_scheduler \
            available_filters | grep -vxF "$NOVA_RDT_FILTER" || true)
        # shellcheck disable=SC2086
        iniset_multiline "$NOVA_CONF" filter_scheduler available_filters $kept
        enabled=$(iniget "$NOVA_CONF" filter_scheduler enabled_filters)
        enabled=$(sed -e 's/,RDTFilter//g; s/^RDTFilter,\?//' <<< "$enabled")
        iniset "$NOVA_CONF" filter_scheduler enabled_filters "$enabled"
    fi
    sudo rm -rf "$NOVA_RDT_STATE_PATH"
    pip_uninstall nova-rdt
}

if is_service_enabled nova-rdt; then
    case "$1" in
        stack)
            case "$2" in
                install) install_nova_rdt ;;
                post-config) configure_nova_rdt ;;
                extra) install_nova_rdt_hook ;;
                test-config)
                    if is_service_enabled tempest; then
                        configure_tempest_nova_rdt
                    fi
                    ;;
            esac
            ;;
        unstack) uninstall_nova_rdt_hook ;;
        clean) cleanup_nova_rdt ;;
    esac
fi
