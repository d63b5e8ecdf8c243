"""nova-rdt shim: ``compute_driver = rdt.LibvirtRDTDriver``.

Nova imports ``'nova.virt.' + compute_driver``; the driver itself lives in
:mod:`nova_rdt.virt.driver`.  Only this one package is shipped under
``nova/`` (no ``nova/__init__.py``), so Nova's own files are untouched.
``nova-rdt install-shim`` writes this file into the ``nova/virt`` that
nova-compute imports.
"""

from nova_rdt.virt.driver import LibvirtRDTDriver

__all__ = ["LibvirtRDTDriver"]
