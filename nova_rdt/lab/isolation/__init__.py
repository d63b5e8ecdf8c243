"""``nova-rdt lab --scenario isolation``: the isolation procedure
(:mod:`nova_rdt.isolation`) on the Host lab, with a forwarding VM and a
noisy neighbour that the lab's in-process Nova builds, on vhost-user
ports of the lab's OVS-DPDK, started by the lab's real libvirtd."""
