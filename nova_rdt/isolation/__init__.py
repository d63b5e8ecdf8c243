"""One isolation procedure for Tempest and the Host lab.

The ONP app note's experiment (a forwarding VM beside a noisy neighbour,
measured with RFC 2544, with and without CAT) written once, against the
small :class:`~nova_rdt.isolation.cloud.IsolationCloud` interface that
Tempest's clients and the lab's in-process Nova both implement.

* ``artifacts``: what a run leaves on disk, the same for the lab and Tempest;
* ``cloud``: what the procedure needs from a cloud;
* ``figures``: Figures 3-2 and 3-3 of the app note, from the tables;
* ``frames``: the procedure's frame dicts from an RFC 2544 report;
* ``procedure``: the experiment itself, once, for any cloud;
* ``tables``: Tables 3-2 and 3-3, from the procedure's conditions;
* ``userdata``: user data for the two roles, for cloud-init images.

This package must not import ``nova_rdt.lab``, ``tempest`` or
``nova.tests``: both sides import it.
"""
