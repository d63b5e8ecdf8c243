"""The allocation core: pure logic shared by every layer.

The ``rdt:`` request language, a host's published RDT state, the planner
(which predicts libvirt's placement), claims, the HOST/MANAGED layout,
the PMD COS plan, class definitions and every name rule.  Nothing here
does I/O or imports Nova; it imports only :mod:`nova_rdt.resctrl`'s pure
modules.  Nova's layers (``api``, ``scheduler``, ``virt``) and the host
side (``host``, ``hook``, ``exporter``) import it, never the reverse.
"""
