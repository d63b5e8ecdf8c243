"""The host side: what runs on a compute host beside libvirt.

* ``agent``: the facade the hook, the commands and the driver call;
* ``classes``: class groups, one per ``rdt:class``, shared by its members;
* ``context``: what the agent's parts share: the host, and how they fail;
* ``domaingroup``: what libvirt's group of a domain gets beyond libvirt's;
* ``enforce``: decided masks into libvirt's group, only where safe;
* ``events``: a libvirt domain event, validated, as the agent acts on it;
* ``lifecycle``: a managed domain's events (prepare, started, release);
* ``ovs``: OVS-DPDK's PMD threads: which cores, which thread ids;
* ``pmdcos``: the PMD COS, the resctrl group of OVS-DPDK's PMD cores;
* ``prep``: host preparation: the HOST/MANAGED layout into resctrl;
* ``procinfo``: processes identified by pid and start time;
* ``reconcile``: remove what dead domains left, re-apply what live ones need;
* ``rooms``: the ways a starting domain's ``prepare`` kept free, until it runs;
* ``records``: the hook's record of each running managed domain;
* ``recovery``: the degraded reasons reconcile cannot repair;
* ``settings``: the hook's configuration, resolved once, read fast.

It is driven by the libvirt hook (:mod:`nova_rdt.hook`), by ``nova-rdt``
commands and by the driver at ``init_host``; it writes resctrl only
through the library.
"""
