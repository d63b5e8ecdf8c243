"""The allocation core: pure logic shared by every layer.

* ``hostlayout``: the HOST/MANAGED split that host preparation writes;
* ``hostplan``: resctrl as read plus the reservations, to and from the solver;
* ``hoststate``: the state a compute publishes for RDTFilter;
* ``metadata``: the ``<metadata>`` record between the driver and the hook;
* ``placement``: where every way goes: the one solver;
* ``planner``: a request as ways per cache id on a host (the demand);
* ``pmdplan``: the PMD COS's masks from the groups as they are;
* ``rdtclass``: ``[rdt] classes`` definitions;
* ``spec``: the ``rdt:`` flavor extra-spec language.

Nothing here does I/O or imports Nova; it imports only
:mod:`nova_rdt.resctrl`'s pure modules (masks and their rules are
:mod:`nova_rdt.resctrl.cbm` and :mod:`~nova_rdt.resctrl.cbmrules`),
:mod:`nova_rdt.naming` and :mod:`nova_rdt.exception`.  Nova's layers
(``api``, ``scheduler``, ``virt``) and the host side (``host``, ``hook``,
``exporter``) import it, never the reverse.
"""
