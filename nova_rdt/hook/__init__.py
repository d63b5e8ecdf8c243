"""The libvirt hook.

``main`` is the entry point the ``libvirt_hooks/qemu`` shim execs,
``hookinput`` reads libvirt's (hostile) input, ``install`` writes the
shim and its resolved settings, and ``adopt`` finds running managed
domains the hook has no record of, for reconcile.  What the hook does to
resctrl is :mod:`nova_rdt.host`'s (its agent, records and settings).
"""
