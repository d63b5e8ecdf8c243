"""The host side: what runs on a compute host beside libvirt.

The agent (class groups, the PMD COS, reconcile), the hook's records,
OVS queries, process identity and host preparation.  It is driven by the
libvirt hook (:mod:`nova_rdt.hook`), by ``nova-rdt`` commands and by the
driver at ``init_host``; it writes resctrl only through the library.
"""
