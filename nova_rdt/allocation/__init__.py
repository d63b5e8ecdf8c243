"""The allocation core: pure logic shared by every layer.

* ``spec``: the ``rdt:`` flavor extra-spec language;
* ``rdtclass``: ``[rdt] classes`` definitions;
* ``placement``: where every way goes, the one solver (rules, search,
  refusals, and the room it leaves for the scheduler);
* ``hostplan``: resctrl as read, plus the reservations, as the solver's
  input, and its plan back as schemata;
* ``hostlayout``: the HOST/MANAGED split host preparation writes;
* ``hoststate``: the state a compute publishes for RDTFilter, with the
  solver's input its claim decides on;
* ``planner``: a request as ways per cache id on a host (the demand),
  and the filter's reading of a document without the solver's input;
* ``pmdplan``: the PMD COS's masks from the groups as they are;
* ``metadata``: the ``<metadata>`` record between the driver and the
  hook.

Nothing here does I/O or imports Nova; it imports only
:mod:`nova_rdt.resctrl`'s pure modules (masks and their rules are
:mod:`nova_rdt.resctrl.cbm` and :mod:`~nova_rdt.resctrl.cbmrules`),
:mod:`nova_rdt.naming` and :mod:`nova_rdt.exception`.  Nova's layers (``api``,
``scheduler``, ``virt``) and the host side (``host``, ``hook``,
``exporter``) import it, never the reverse.
"""
