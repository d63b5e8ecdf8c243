#!/bin/busybox sh
# shellcheck shell=dash  # busybox ash, which dash rules cover
# /init of the nova-rdt lab guest (PID 1 in the initramfs that
# tools/build-guest-image.sh builds).  The role comes from the kernel
# command line, nova_rdt.role=forward|noisy|probe|auto (auto: forward
# when the guest has two NICs, else idle); every line meant for the host
# starts with "nova-rdt-guest:" on the serial console, which is how
# nova_rdt.lab.guest.boot knows how far the guest got.  The workload
# lines are also said as the isolation scenario's cloud-init scripts say
# them (nova_rdt/isolation/userdata.py: "nova-rdt-forwarder: testpmd",
# "nova-rdt-noisy: memtester"), so that Tempest reads this image's
# console as it reads a cloud image's.
# PID 1 must never exit (the kernel would panic), so each role ends idle.
/bin/busybox mkdir -p /bin /sbin /proc /sys /dev /tmp
/bin/busybox --install -s /bin
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
# The initramfs root comes world-writable; DPDK's EAL refuses to load
# plugins from under a world-writable directory.
chmod 0755 /

say() { echo "nova-rdt-guest: $*"; }
# The isolation scenario's marks (nova_rdt.isolation.userdata).
mark() { echo "nova-rdt-$1: $2"; }
idle() { while :; do sleep 3600; done; }
fail() { say "error: $*"; idle; }
arg() { sed -n "s/.*nova_rdt\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
LIBS=/lib/x86_64-linux-gnu
HP=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages

wait_nics() {
    n=0
    until [ -e /sys/class/net/eth0 ] && [ -e /sys/class/net/eth1 ]; do
        n=$((n + 1))
        [ $n -gt 100 ] && fail "eth0 and eth1 not found: $(ls /sys/class/net)"
        usleep 100000
    done
}

bridge() {
    # STP off and no forward delay: ports forward as soon as they are
    # up.  Debian's busybox brctl lacks stp/setfd, so through sysfs.
    brctl addbr br0 || fail "brctl addbr failed"
    echo 0 > /sys/class/net/br0/bridge/stp_state
    echo 0 > /sys/class/net/br0/bridge/forward_delay
    for nic in eth0 eth1; do
        ip link set "$nic" up || fail "ip link set $nic up failed"
        brctl addif br0 "$nic" || fail "brctl addif br0 $nic failed"
    done
    ip link set br0 up || fail "ip link set br0 up failed"
}

# The virtio-net functions: vendor 1af4, device 1000 (transitional, as
# QEMU's virtio-net-pci is on pc machines) or 1041 (modern only).
virtio_nics() {
    for d in /sys/bus/pci/devices/*; do
        [ "$(cat "$d/vendor")" = 0x1af4 ] || continue
        case "$(cat "$d/device")" in
        0x1000|0x1041) echo "${d##*/}" ;;
        esac
    done
}

# testpmd in io mode between the two NICs, as the ONP seed's VM0 runs
# it.  Returns 1 with the reason in $why at the first step that fails.
why=""
tp_pid=""
keep_pid=""
try_testpmd() {
    [ -x /bin/dpdk-testpmd ] || { why="testpmd is not in this image"; return 1; }
    grep -qw hugetlbfs /proc/filesystems \
        || { why="the kernel has no hugetlbfs"; return 1; }
    # hugepages=N on the kernel command line reserves them at boot;
    # else now (memory is not fragmented yet this early).
    [ "$(cat $HP)" -ge 64 ] || echo 64 > $HP
    pages=$(cat $HP)
    [ "$pages" -ge 16 ] || {
        why="only $pages 2 MiB hugepages could be reserved (the guest needs 512 MiB of RAM)"
        return 1; }
    mount -t hugetlbfs nodev /mnt/huge || { why="mount hugetlbfs failed"; return 1; }
    nics=$(virtio_nics)
    # shellcheck disable=SC2086  # split into one NIC per argument
    set -- $nics
    [ $# -eq 2 ] || { why="$# virtio-net PCI functions, not 2 ($nics)"; return 1; }
    allow=""
    for bdf in $nics; do
        dev=/sys/bus/pci/devices/$bdf
        # driver_override makes uio_pci_generic the only driver the
        # function may bind, so virtio-pci cannot take it back.
        echo uio_pci_generic > "$dev/driver_override" \
            || { why="cannot set driver_override of $bdf"; return 1; }
        if [ -e "$dev/driver" ]; then
            echo "$bdf" > "$dev/driver/unbind" \
                || { why="cannot unbind $bdf from its kernel driver"; return 1; }
        fi
        echo "$bdf" > /sys/bus/pci/drivers/uio_pci_generic/bind \
            || { why="uio_pci_generic refused $bdf"; return 1; }
        allow="$allow -a $bdf"
    done
    plugins=""
    # shellcheck disable=SC2013  # one plugin path per word
    for p in $(cat /etc/dpdk-plugins); do plugins="$plugins -d $p"; done
    # Main lcore and one forwarding lcore: on their own vCPUs if the
    # guest has two, else both on vCPU 0 (the main lcore only waits).
    if [ "$(grep -c ^processor /proc/cpuinfo)" -ge 2 ]; then
        cores="-l 0,1"
    else
        cores="--lcores=0@0,1@0"
    fi
    # testpmd without -i starts forwarding, then reads stdin until a
    # newline or EOF and exits: a FIFO whose writer never writes keeps
    # it running.
    mkfifo /tmp/testpmd.in
    sleep 2147483647 > /tmp/testpmd.in &
    keep_pid=$!
    # Line-buffered stdout (coreutils' stdbuf library): the log is a
    # file, and the wait below reads it while testpmd runs.
    # shellcheck disable=SC2086  # $cores, $plugins, $allow: lists of flags
    _STDBUF_O=L LD_PRELOAD=$LIBS/libstdbuf.so \
    LD_LIBRARY_PATH=$LIBS dpdk-testpmd $cores -n 1 --huge-dir /mnt/huge \
        --no-telemetry $plugins $allow -- \
        --forward-mode=io --auto-start --nb-cores=1 --port-topology=paired \
        --total-num-mbufs=4096 --rxd=256 --txd=256 \
        < /tmp/testpmd.in > /tmp/testpmd.log 2>&1 &
    tp_pid=$!
    limit=$(arg testpmd_timeout)
    n=0
    until grep -q "Press enter to exit" /tmp/testpmd.log; do
        kill -0 $tp_pid 2>/dev/null || {
            wait $tp_pid
            rc=$?
            # 132 is SIGILL: DPDK's x86 build needs SSE4.2, which QEMU's
            # default qemu64 CPU model lacks (give the guest -cpu max,
            # host, or a model from Nehalem on).
            hint=""
            [ $rc = 132 ] && hint=" (SIGILL: does the vCPU model have SSE4.2?)"
            why="testpmd exited with status $rc$hint: $(grep -v '^ *$' /tmp/testpmd.log | tail -n 1)"
            return 1; }
        n=$((n + 1))
        [ $n -gt $((${limit:-120} * 5)) ] && {
            why="testpmd not forwarding after ${limit:-120} s: $(tail -n 1 /tmp/testpmd.log)"
            return 1; }
        usleep 200000
    done
    grep -q "ports=2 " /tmp/testpmd.log || {
        why="testpmd is not forwarding between two ports: $(grep 'forwarding - ports' /tmp/testpmd.log)"
        return 1; }
}

# After a testpmd failure: stop it and hand the NICs back to virtio-pci.
give_back() {
    [ -n "$tp_pid" ] && kill -9 $tp_pid 2>/dev/null
    [ -n "$keep_pid" ] && kill $keep_pid 2>/dev/null
    for bdf in $(virtio_nics); do
        dev=/sys/bus/pci/devices/$bdf
        echo > "$dev/driver_override"
        [ -e "$dev/driver" ] && [ "$(basename "$(readlink "$dev/driver")")" != virtio-pci ] \
            && echo "$bdf" > "$dev/driver/unbind"
        [ -e "$dev/driver" ] || echo "$bdf" > /sys/bus/pci/drivers/virtio-pci/bind
    done
    wait_nics
}

load_modules() {
    # Load order (dependencies first) is computed at build time.
    # shellcheck disable=SC2013  # one module name per word
    for m in $(cat /lib/modules/load-order); do
        insmod "/lib/modules/$m.ko" || fail "insmod $m failed"
    done
}

# Forward between the two NICs: testpmd where it can, else the kernel.
forward() {
    # The virtio NICs come up as eth0/eth1 first either way (the caller
    # loaded the modules); testpmd then takes them from the kernel, and
    # gives them back if it fails.
    # Our own bridge port traffic (IPv6 autoconf) would be noise on the
    # wire the host measures.
    sysctl -qw net.ipv6.conf.all.disable_ipv6=1 2>/dev/null
    sysctl -qw net.ipv6.conf.default.disable_ipv6=1 2>/dev/null
    wait_nics
    forwarder=$(arg forwarder)
    case "${forwarder:=auto}" in
    auto|testpmd)
        if try_testpmd; then
            say "forwarding eth0<->eth1 (testpmd)"
            mark forwarder testpmd
            idle
        fi
        # Its own words, for whoever reads the console log.
        [ -s /tmp/testpmd.log ] && tail -n 15 /tmp/testpmd.log | sed 's/^/testpmd| /'
        [ "$forwarder" = testpmd ] && fail "testpmd: $why"
        say "testpmd not used: $why"
        give_back
        ;;
    kernel) ;;
    *)  fail "unknown nova_rdt.forwarder=$forwarder (auto, testpmd or kernel)"
        ;;
    esac
    bridge
    say "forwarding eth0<->eth1 (kernel bridge)"
    mark forwarder kernel
    idle
}

role=$(arg role)
say "init role=${role:-forward} kernel=$(uname -r)"

case "${role:-forward}" in
probe)
    # Userspace reached: all the acceleration probe needs to know.
    poweroff -f
    idle
    ;;
forward)
    load_modules
    forward
    ;;
auto)
    load_modules
    n=$(virtio_nics | wc -l)
    if [ "$n" -ge 2 ]; then
        forward
    fi
    say "ready: $n virtio NICs, nothing to forward (two make it forward)"
    idle
    ;;
noisy)
    mib=$(arg stress_mib)
    noisy=$(arg noisy)
    if [ -z "$noisy" ]; then
        noisy=stressor
        [ -x /bin/memtester ] && noisy=memtester
    fi
    case "$noisy" in
    memtester)
        [ -x /bin/memtester ] || fail "memtester is not in this image"
        # No loop count: it tests until stopped.  Its progress output
        # (backspaces) would flood the console the host reads, so to a
        # file, line-buffered so that "Loop 1" (memory got and locked,
        # testing started) can be waited for.
        _STDBUF_O=L LD_PRELOAD=$LIBS/libstdbuf.so LD_LIBRARY_PATH=$LIBS \
            memtester "${mib:-64}M" >/tmp/noisy.log 2>&1 &
        ;;
    stressor)
        nova-rdt-stress "${mib:-64}" >/tmp/noisy.log 2>&1 &
        ;;
    *)  fail "unknown nova_rdt.noisy=$noisy (memtester or stressor)" ;;
    esac
    pid=$!
    n=0
    while :; do
        usleep 200000
        kill -0 $pid 2>/dev/null \
            || fail "$noisy exited: $(grep -v '^ *$' /tmp/noisy.log | tail -n 1)"
        [ "$noisy" = stressor ] && break
        grep -q "^Loop 1" /tmp/noisy.log && break
        n=$((n + 1))
        [ $n -gt 300 ] && fail "memtester has not started testing after 60 s"
    done
    say "noisy running ($noisy ${mib:-64} MiB, pid $pid)"
    mark noisy "$noisy ${mib:-64} MiB"
    idle
    ;;
*)
    fail "unknown nova_rdt.role=$role (forward, noisy, probe or auto)"
    ;;
esac
