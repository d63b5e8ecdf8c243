"""``nova-rdt lab --scenario cloud``: an all-in-one OpenStack cloud on
this machine, every service a real process, as devstack would run it.

RabbitMQ, MariaDB, Keystone, Glance, Placement, Neutron's API and Nova's
API, conductor, scheduler and compute run as separate processes in the
lab's directory (the APIs under uWSGI, as devstack runs them);
nova-compute, the nova-rdt exporter and controller run in the Host lab's
mount namespace, where ``/sys/fs/resctrl``, ``/etc/nova``,
``/run/libvirt`` and ``/etc/libvirt`` are the lab's own, beside its real
libvirtd and OVS-DPDK.  nova.conf's RDT parts are written by the
devstack plugin's own functions.  The cloud serves until stopped, or runs
its checks and stops (``--short``).
"""
