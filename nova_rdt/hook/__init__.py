"""The libvirt hook.

* ``adopt``: running managed domains without a record, for reconcile;
* ``hookinput``: libvirt's hook input, read as hostile;
* ``install``: writes the ``libvirt_hooks/qemu`` shim and its settings;
* ``main``: the entry point the shim execs.

What the hook does to resctrl is :mod:`nova_rdt.host`'s (its agent,
records and settings).
"""
