"""User data for the two roles, for clouds that boot a cloud-init image.

Nova's API takes ``user_data`` base64-encoded, and a JSON null is not
"no user data" to every client: :func:`for_role` therefore always
returns base64 text.  Each script writes one line to the console
(``nova-rdt-forwarder: testpmd|kernel``, ``nova-rdt-noisy: <load>``), so
a cloud can tell from the console log which forwarder ran.
"""

from __future__ import annotations

import base64

from nova_rdt.isolation import cloud as cloud_mod

FORWARDER_MARK = "nova-rdt-forwarder:"
NOISY_MARK = "nova-rdt-noisy:"

# The dataplane NICs are the last two (the first is the management
# NIC cloud-init configures).  testpmd in io mode as the app note's VM0
# where DPDK and uio_pci_generic are there; otherwise the kernel
# forwards between the two NICs (tc mirred, or a bridge).
_FORWARDING = r"""#!/bin/sh
# nova-rdt isolation: the forwarding VM.
set -u
nics=$(ls /sys/class/net | grep -v '^lo$' | sort | tail -n 2)
set -- $nics
if [ $# -lt 2 ]; then
    echo "{mark} none (needs two dataplane NICs, found: $nics)" >/dev/console
    exit 1
fi
a=$1 b=$2
pci() {{ basename "$(readlink -f /sys/class/net/$1/device)"; }}
if command -v dpdk-testpmd >/dev/null 2>&1 && modprobe uio_pci_generic; then
    echo 512 > /proc/sys/vm/nr_hugepages
    pa=$(pci $a) pb=$(pci $b)
    for p in $pa $pb; do
        echo uio_pci_generic > /sys/bus/pci/devices/$p/driver_override
        echo $p > /sys/bus/pci/devices/$p/driver/unbind
        echo $p > /sys/bus/pci/drivers_probe
    done
    echo "{mark} testpmd" >/dev/console
    exec dpdk-testpmd -a $pa -a $pb -- --forward-mode=io --auto-start \
        --stats-period 0 </dev/null >/var/log/nova-rdt-testpmd.log 2>&1
fi
for n in $a $b; do ip link set $n promisc on up; done
if tc qdisc add dev $a ingress 2>/dev/null \
        && tc qdisc add dev $b ingress \
        && tc filter add dev $a parent ffff: matchall \
            action mirred egress redirect dev $b \
        && tc filter add dev $b parent ffff: matchall \
            action mirred egress redirect dev $a; then
    :
else
    ip link add nova-rdt-fwd type bridge stp_state 0 ageing_time 0
    ip link set $a master nova-rdt-fwd
    ip link set $b master nova-rdt-fwd
    ip link set nova-rdt-fwd up
fi
echo "{mark} kernel" >/dev/console
"""

# memtester as the app note's VM1, or stress-ng's cache stressors;
# whatever the image has, it keeps the neighbour busy until paused.
_NOISY = r"""#!/bin/sh
# nova-rdt isolation: the noisy neighbour ({load}).
set -u
if [ {load} = stress-ng ] && command -v stress-ng >/dev/null 2>&1; then
    echo "{mark} stress-ng" >/dev/console
    exec stress-ng --cache 0 --cache-level 3 --vm 1 --vm-bytes {mb}M \
        --timeout 0 </dev/null >/dev/null 2>&1
fi
if command -v memtester >/dev/null 2>&1; then
    echo "{mark} memtester" >/dev/console
    exec memtester {mb}M 0 </dev/null >/dev/null 2>&1
fi
echo "{mark} dd (no memtester or stress-ng in the image)" >/dev/console
while :; do dd if=/dev/zero of=/dev/null bs={mb}M count=64 2>/dev/null; done
"""


def script(role: str, settings) -> str:
    """The user data script of ``role`` as text (not encoded)."""
    if role == cloud_mod.FORWARDING:
        if settings.forwarding_user_data:
            return settings.forwarding_user_data
        return _FORWARDING.format(mark=FORWARDER_MARK)
    if role == cloud_mod.NOISY:
        if settings.noisy_user_data:
            return settings.noisy_user_data
        return _NOISY.format(mark=NOISY_MARK, load=settings.noisy_load,
                             mb=settings.noisy_memory_mb)
    raise ValueError(f"role {role!r} is not one of "
                     f"{', '.join(cloud_mod.ROLES)}")


def encode(text: str) -> str:
    """``text`` as Nova wants ``user_data``: base64 of its UTF-8."""
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def for_role(role: str, settings) -> str:
    """Base64 user data for ``role`` (never None)."""
    return encode(script(role, settings))


def forwarder_from_console(console: str) -> str:
    """``testpmd``, ``kernel`` or ``unknown``, from a console log."""
    found = "unknown"
    for line in (console or "").splitlines():
        if FORWARDER_MARK in line:
            word = line.split(FORWARDER_MARK, 1)[1].split()
            if word and word[0] in ("testpmd", "kernel"):
                found = word[0]
    return found
