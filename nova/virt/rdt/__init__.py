"""Shim so that ``[DEFAULT] compute_driver = rdt.LibvirtRDTDriver`` works.

Nova imports ``'nova.virt.' + compute_driver``; the driver itself lives in
:mod:`nova_rdt.virt.driver`.  Only this one package is shipped under
``nova/`` (no ``nova/__init__.py``), so Nova's own files are untouched.
"""

from nova_rdt.virt.driver import LibvirtRDTDriver

__all__ = ["LibvirtRDTDriver"]
