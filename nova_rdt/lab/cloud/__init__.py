"""Nova's in-process functional framework on hosts that look like Intel
RDT hosts: the base class of the Nova functional tests and the lab's Nova
cloud.

Developer tooling: it needs Nova's test tree and test-only dependencies
(the ``[lab]`` extra and test-requirements.txt), and Nova's eventlet
monkey-patching before anything imports oslo.messaging.  Nothing a compute
node runs imports it.  :mod:`.libvirt_caps` and :mod:`.host_sysfs` import
no Nova at all.
"""
