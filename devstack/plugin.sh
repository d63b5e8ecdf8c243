#!/bin/bash
# nova-rdt devstack plugin: enable it from a local checkout (devstack
# clones the branch named from any git URL, a local path too) with
#
#   enable_plugin nova-rdt file:///opt/stack/nova-rdt-src main
#   TEMPEST_PLUGINS=$DEST/nova-rdt
#
# (devstack/README.md: the whole local.conf, two nodes with OVS-DPDK).
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
    elif ! command -v nova-rdt; then
        # Under errexit a bare failure here would end the phase silently.
        echo "nova-rdt plugin: no nova-rdt command in" \
            "${NOVA_BIN_DIR:-/usr/local/bin} or on PATH (stack install" \
            "puts it there)" >&2
        return 1
    fi
}

# Add VALUE to a multi-valued option unless it is there already.
# devstack's iniget_multiline prints every value on one line, space-
# separated, and its iniadd appends whatever is there: check first.
function _nova_rdt_iniadd_once {
    local file=$1 section=$2 option=$3 value=$4
    local current
    current=$(iniget_multiline "$file" "$section" "$option")
    if [[ " $current " != *" $value "* ]]; then
        iniadd "$file" "$section" "$option" "$value"
    fi
}

# Remove VALUE from a multi-valued option; drop the option if nothing
# but DEFAULT (Nova's own default, given to keep it) is left.
function _nova_rdt_inirm {
    local file=$1 section=$2 option=$3 value=$4 default=${5:-}
    local kept=() v
    for v in $(iniget_multiline "$file" "$section" "$option"); do
        [[ $v == "$value" ]] || kept+=("$v")
    done
    if [[ ${#kept[@]} -eq 0 || ${kept[*]} == "$default" ]]; then
        inidelete "$file" "$section" "$option"
    else
        iniset_multiline "$file" "$section" "$option" "${kept[@]}"
    fi
}

# Drop a whole section (header and options); devstack has no function
# for it.  Only for sections that are nova-rdt's alone.
function _nova_rdt_drop_section {
    local file=$1 section=$2 tmp
    [[ -f $file ]] || return 0
    tmp=$(mktemp)
    awk -v sec="[$section]" '
        index($0, sec) == 1 { skip = 1; next }
        skip && /^\[.*\]/ { skip = 0 }
        !skip' "$file" > "$tmp"
    # Keep the file's owner and mode: rewrite it in place.
    cat "$tmp" > "$file"
    rm -f "$tmp"
    # The blank line iniset put before the header, if now trailing.
    sed -i -e :a -e '/^\n*$/{$d;N;ba' -e '}' "$file"
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
    # Editable, as devstack installs every project from $DEST.
    setup_develop "$NOVA_RDT_DIR"
    _nova_rdt_install_shim
}

# Nova imports nova.virt.rdt from the nova/virt it runs from: with Nova
# from $NOVA_DIR that is $NOVA_DIR/nova/virt, not site-packages.
function _nova_rdt_install_shim {
    local bin
    bin=$(_nova_rdt_bin)
    if [[ -d $NOVA_DIR/nova/virt ]]; then
        "$bin" shim install --virt-dir "$NOVA_DIR/nova/virt"
    else
        "$bin" shim install --python "${NOVA_RDT_NOVA_PYTHON:-python3}"
    fi
}

function configure_nova_rdt {
    iniset "$NOVA_CONF" DEFAULT compute_driver "$NOVA_RDT_DRIVER"
    # Setting available_filters replaces Nova's default (all_filters):
    # name it beside ours.
    _nova_rdt_iniadd_once "$NOVA_CONF" filter_scheduler available_filters \
        "$NOVA_RDT_ALL_FILTERS"
    _nova_rdt_iniadd_once "$NOVA_CONF" filter_scheduler available_filters \
        "$NOVA_RDT_FILTER"
    local enabled
    enabled=$(iniget "$NOVA_CONF" filter_scheduler enabled_filters)
    enabled=${enabled:-$NOVA_RDT_DEFAULT_ENABLED_FILTERS}
    if [[ ,$enabled, != *,RDTFilter,* ]]; then
        enabled="$enabled,RDTFilter"
    fi
    iniset "$NOVA_CONF" filter_scheduler enabled_filters "$enabled"

    iniset "$NOVA_CONF" rdt reserved_host_ways "$NOVA_RDT_RESERVED_HOST_WAYS"
    iniset "$NOVA_CONF" rdt pmd_shared_ways "$NOVA_RDT_PMD_SHARED_WAYS"
    iniset "$NOVA_CONF" rdt pmd_cos "$(_nova_rdt_pmd_cos)"
    iniset "$NOVA_CONF" rdt require_resctrl "$NOVA_RDT_REQUIRE_RESCTRL"
    iniset "$NOVA_CONF" rdt resctrl_root "$NOVA_RDT_RESCTRL_ROOT"
    iniset "$NOVA_CONF" rdt state_path "$NOVA_RDT_STATE_PATH"
    local classes=()
    IFS=';' read -r -a classes <<< "$NOVA_RDT_CLASSES"
    if [[ ${#classes[@]} -gt 0 ]]; then
        iniset_multiline "$NOVA_CONF" rdt classes "${classes[@]}"
    fi
    if is_service_enabled n-cpu; then
        configure_nova_rdt_rootwrap
        mount_nova_rdt_resctrl
    fi
    if is_service_enabled n-api && [[ -f $NOVA_API_PASTE_INI ]]; then
        configure_nova_rdt_paste
    fi
}

# nova-compute starts the privsep daemon through
# "sudo nova-rootwrap $NOVA_CONF_DIR/rootwrap.conf privsep-helper ...";
# devstack's configure_rootwrap has filled rootwrap.d by now.
function configure_nova_rdt_rootwrap {
    sudo install -D -m 644 \
        "$NOVA_RDT_DIR/etc/nova/rootwrap.d/nova-rdt.filters" \
        "$NOVA_CONF_DIR/rootwrap.d/nova-rdt.filters"
}

# The compute API pipelines nova-api serves: /v2.1 and the legacy /v2,
# which runs neither this filter's check nor Nova's per-key validation
# unless the filter is in it too.
NOVA_RDT_PASTE_PIPELINES="composite:openstack_compute_api_v21
composite:openstack_compute_api_v21_legacy_v2_compatible"

# The whole-flavor check, in each keystone pipeline right after
# keystonecontext (it needs the request's context), once.
function configure_nova_rdt_paste {
    local ini=$NOVA_API_PASTE_INI section
    iniset "$ini" "filter:$NOVA_RDT_PASTE_FILTER" paste.filter_factory \
        nova_rdt.api.flavor_check:filter_factory
    for section in $NOVA_RDT_PASTE_PIPELINES; do
        _nova_rdt_paste_insert "$ini" "$section"
    done
}

function _nova_rdt_paste_insert {
    local ini=$1 section=$2 pipeline new=() w
    pipeline=$(iniget "$ini" "$section" keystone)
    if [[ -z $pipeline || " $pipeline " == *" $NOVA_RDT_PASTE_FILTER "* ]]; then
        return 0
    fi
    for w in $pipeline; do
        new+=("$w")
        [[ $w == keystonecontext ]] && new+=("$NOVA_RDT_PASTE_FILTER")
    done
    if [[ " ${new[*]} " != *" $NOVA_RDT_PASTE_FILTER "* ]]; then
        # No keystonecontext: right before the application.
        new=("${new[@]:0:${#new[@]}-1}" "$NOVA_RDT_PASTE_FILTER" "${new[-1]}")
    fi
    iniset "$ini" "$section" keystone "${new[*]}"
}

function _nova_rdt_cpu_has_rdt {
    grep -qwE 'rdt_a|cat_l3|cat_l2|mba|cqm_llc|cqm_occup_llc' \
        "$NOVA_RDT_CPUINFO" && grep -qw resctrl "$NOVA_RDT_FILESYSTEMS"
}

# resctrl must be there before nova-compute starts (it prepares the host
# in init_host).  Only where the CPU has RDT, and only if not mounted yet;
# etc/systemd/sys-fs-resctrl.mount does the same at boot.
function mount_nova_rdt_resctrl {
    if ! _nova_rdt_cpu_has_rdt; then
        echo "nova-rdt: this CPU has no RDT; resctrl not mounted"
        return 0
    fi
    if mountpoint -q "$NOVA_RDT_RESCTRL_ROOT" 2>/dev/null; then
        return 0
    fi
    local opts=()
    [[ -n $NOVA_RDT_MOUNT_OPTIONS ]] && opts=(-o "$NOVA_RDT_MOUNT_OPTIONS")
    sudo mount -t resctrl "${opts[@]}" resctrl "$NOVA_RDT_RESCTRL_ROOT"
    sudo install -d -m 755 "$NOVA_RDT_STATE_PATH"
    sudo touch "$NOVA_RDT_STATE_PATH/.resctrl-mounted-by-devstack"
}

function start_nova_rdt_exporter {
    run_process nova-rdt-exporter "$(_nova_rdt_bin) exporter --config-file ${NOVA_CPU_CONF:-$NOVA_CONF} --port $NOVA_RDT_EXPORTER_PORT"
}

function stop_nova_rdt_exporter {
    stop_process nova-rdt-exporter
}

# The runtime controller (enable_service nova-rdt-controller): SIGTERM
# at stop_process puts every class back to its static values.
function start_nova_rdt_controller {
    run_process nova-rdt-controller "$(_nova_rdt_bin) controller --config-file ${NOVA_CPU_CONF:-$NOVA_CONF} --policy $NOVA_RDT_CONTROLLER_POLICY"
}

function stop_nova_rdt_controller {
    stop_process nova-rdt-controller
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
    local option var value
    for option in $NOVA_RDT_TEMPEST_OPTIONS; do
        var=NOVA_RDT_TEMPEST_${option^^}
        # Set, even to nothing (mem_page_size and cpu_policy: "do not set
        # the extra spec"), is written; unset keeps the option's default.
        [[ -n ${!var+set} ]] || continue
        value=${!var}
        if [[ $option == dataplane_networks ]]; then
            # Its own assignment, so that a failed look-up ends the phase.
            value=$(_nova_rdt_network_ids "$value")
        fi
        iniset "$TEMPEST_CONFIG" nova_rdt "$option" "$value"
    done
}

# Network names or ids, comma-separated, as ids (what the scenario's
# dataplane_networks takes): a name is looked up in Neutron.
function _nova_rdt_network_ids {
    local ids=() net id
    for net in ${1//,/ }; do
        if [[ $net =~ ^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$ ]]; then
            ids+=("$net")
        else
            if ! id=$(openstack network show -f value -c id "$net"); then
                echo "nova-rdt plugin: NOVA_RDT_TEMPEST_DATAPLANE_NETWORKS:" \
                    "no network $net" >&2
                return 1
            fi
            ids+=("$id")
        fi
    done
    local IFS=,
    echo "${ids[*]}"
}

function uninstall_nova_rdt_hook {
    local bin
    bin=$(_nova_rdt_bin) || return 0
    sudo "$bin" hook uninstall --hooks-dir "$NOVA_RDT_HOOKS_DIR" \
        --settings-path "$NOVA_RDT_HOOK_SETTINGS"
}

function cleanup_nova_rdt {
    stop_nova_rdt_exporter
    uninstall_nova_rdt_hook
    if [[ -f $NOVA_CONF ]]; then
        if [[ $(iniget "$NOVA_CONF" DEFAULT compute_driver) == "$NOVA_RDT_DRIVER" ]]; then
            inidelete "$NOVA_CONF" DEFAULT compute_driver
        fi
        _nova_rdt_drop_section "$NOVA_CONF" rdt
        _nova_rdt_inirm "$NOVA_CONF" filter_scheduler available_filters \
            "$NOVA_RDT_FILTER" "$NOVA_RDT_ALL_FILTERS"
        local enabled
        enabled=$(iniget "$NOVA_CONF" filter_scheduler enabled_filters)
        enabled=$(sed -e 's/,RDTFilter//g; s/^RDTFilter,\?//' <<< "$enabled")
        if [[ -n $enabled ]]; then
            iniset "$NOVA_CONF" filter_scheduler enabled_filters "$enabled"
        fi
    fi
    if [[ -f $NOVA_API_PASTE_INI ]]; then
        local section pipeline kept w
        for section in $NOVA_RDT_PASTE_PIPELINES; do
            pipeline=$(iniget "$NOVA_API_PASTE_INI" "$section" keystone)
            [[ " $pipeline " == *" $NOVA_RDT_PASTE_FILTER "* ]] || continue
            kept=()
            for w in $pipeline; do
                [[ $w == "$NOVA_RDT_PASTE_FILTER" ]] || kept+=("$w")
            done
            iniset "$NOVA_API_PASTE_INI" "$section" keystone "${kept[*]}"
        done
        _nova_rdt_drop_section "$NOVA_API_PASTE_INI" \
            "filter:$NOVA_RDT_PASTE_FILTER"
    fi
    sudo rm -f "$NOVA_CONF_DIR/rootwrap.d/nova-rdt.filters"
    if [[ -d $NOVA_DIR/nova/virt ]]; then
        "$(_nova_rdt_bin)" shim uninstall \
            --virt-dir "$NOVA_DIR/nova/virt" || true
    fi
    if [[ -e $NOVA_RDT_STATE_PATH/.resctrl-mounted-by-devstack ]]; then
        # Unmounting drops every group: only what this plugin mounted.
        sudo umount "$NOVA_RDT_RESCTRL_ROOT" || true
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
                extra)
                    install_nova_rdt_hook
                    start_nova_rdt_exporter
                    start_nova_rdt_controller
                    ;;
                test-config)
                    if is_service_enabled tempest; then
                        configure_tempest_nova_rdt
                    fi
                    ;;
            esac
            ;;
        unstack)
            stop_nova_rdt_controller
            stop_nova_rdt_exporter
            uninstall_nova_rdt_hook
            ;;
        clean) cleanup_nova_rdt ;;
    esac
fi
