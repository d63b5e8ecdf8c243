"""The host side: what runs on a compute host beside libvirt.

The agent (a facade over a domain's events, libvirt's group of a
domain, class groups, the PMD COS and reconcile), the hook's records,
OVS queries, process identity and host preparation.  It is driven by the
libvirt hook (:mod:`nova_rdt.hook`), by ``nova-rdt`` commands and by the
driver at ``init_host``; it writes resctrl only through the library.
"""
