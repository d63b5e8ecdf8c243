"""Nova's compute side: the libvirt driver with Intel RDT.

* ``config``: libvirt XML objects for RDT, as nova.virt.libvirt.config's;
* ``driver``: LibvirtRDTDriver, whose overrides hook ``rdt_compute`` in;
* ``guest_rdt``: a planned demand as a domain's RDT XML and metadata;
* ``libvirt_caps``: cache banks and MBA nodes from libvirt's capabilities;
* ``migration``: live migration: a destination claim and an XML rewrite;
* ``placer``: the compute's placement: decided, reserved, enforced;
* ``publish``: the compute's RDT state to the scheduler now;
* ``rdt_compute``: the RDT side of one compute, as one object.
"""
