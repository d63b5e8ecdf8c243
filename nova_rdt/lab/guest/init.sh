#!/bin/busybox sh
# /init of the nova-rdt lab guest (PID 1 in the initramfs that
# tools/build-guest-image.sh builds).  The role comes from the kernel
# command line, nova_rdt.role=forward|noisy|probe; every line meant for
# the host starts with "nova-rdt-guest:" on the serial console, which is
# how nova_rdt.lab.guest.boot knows how far the guest got.
# PID 1 must never exit (the kernel would panic), so each role ends idle.
/bin/busybox mkdir -p /bin /sbin /proc /sys /dev /tmp
/bin/busybox --install -s /bin
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null

say() { echo "nova-rdt-guest: $*"; }
idle() { while :; do sleep 3600; done; }
fail() { say "error: $*"; idle; }
arg() { sed -n "s/.*nova_rdt\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }

role=$(arg role)
say "init role=${role:-forward} kernel=$(uname -r)"

case "${role:-forward}" in
probe)
    # Userspace reached: all the acceleration probe needs to know.
    poweroff -f
    idle
    ;;
forward)
    # Load order (dependencies first) is computed at build time.
    for m in $(cat /lib/modules/load-order); do
        insmod "/lib/modules/$m.ko" || fail "insmod $m failed"
    done
    # Our own bridge port traffic (IPv6 autoconf) would be noise on the
    # wire the host measures.
    sysctl -qw net.ipv6.conf.all.disable_ipv6=1 2>/dev/null
    sysctl -qw net.ipv6.conf.default.disable_ipv6=1 2>/dev/null
    n=0
    until [ -e /sys/class/net/eth0 ] && [ -e /sys/class/net/eth1 ]; do
        n=$((n + 1))
        [ $n -gt 100 ] && fail "eth0 and eth1 not found: $(ls /sys/class/net)"
        usleep 100000
    done
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
    say "forwarding eth0<->eth1 (kernel bridge)"
    idle
    ;;
noisy)
    mib=$(arg stress_mib)
    nova-rdt-stress ${mib:-64} &
    usleep 200000
    kill -0 $! 2>/dev/null || fail "nova-rdt-stress exited"
    say "noisy running (nova-rdt-stress ${mib:-64} MiB, pid $!)"
    idle
    ;;
*)
    fail "unknown nova_rdt.role=$role (forward, noisy or probe)"
    ;;
esac
