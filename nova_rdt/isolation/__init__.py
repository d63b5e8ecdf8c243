"""One isolation procedure for Tempest and the Host lab.

The ONP app note's experiment (a forwarding VM beside a noisy neighbour,
measured with RFC 2544, with and without CAT) written once, against the
small :class:`~nova_rdt.isolation.cloud.IsolationCloud` interface that
Tempest's clients and the lab's in-process Nova both implement.

This package must not import ``nova_rdt.lab``, ``tempest`` or
``nova.tests``: both sides import it.
"""
