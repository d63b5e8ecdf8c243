"""The ``nova-rdt`` command: a dispatcher over one module per command.

* ``common``: what the commands share: parser, option types, exit codes;
* ``controller``: ``nova-rdt controller``, the runtime resource manager;
* ``emulate``: ``nova-rdt emulate``: mount an emulated resctrl;
* ``exporter``: ``nova-rdt exporter``: metrics, way-map page, notifications;
* ``hook``: ``nova-rdt hook install|uninstall``;
* ``host``: ``nova-rdt host show``: this host's RDT state;
* ``install_shim``: ``nova-rdt shim install|uninstall``;
* ``main``: the dispatcher;
* ``pmd``: ``nova-rdt pmd sync``: re-derive the OVS-DPDK PMD COS;
* ``reconcile``: ``nova-rdt reconcile``: clean up after dead domains;
* ``reference``: the command reference, read from the parser itself;
* ``rfc2544``: ``nova-rdt rfc2544 run``'s arguments;
* ``status``: ``nova-rdt status upgrade check``.
"""
