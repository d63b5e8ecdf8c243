"""A kernel-faithful resctrl filesystem for hosts without RDT hardware.

* ``counters``: monitoring counters, from the real CPU time of each group;
* ``ctrl``: a control group's allocation: schemata, size, mode, locking;
* ``dirs``: mkdir, rmdir and rename, and the CLOSIDs and RMIDs they take;
* ``fusefs``: the FUSE adaptor that serves the model as a filesystem;
* ``info``: ``info/``: what the hardware offers, and bit_usage;
* ``kernel``: the in-memory model of the kernel's resctrl filesystem;
* ``kparse``: the kernel's string parsers and bitmap printers;
* ``membership``: who is in a group: ``tasks``, ``cpus``, ``cpus_list``;
* ``mount``: start and stop it, on a directory or as /sys/fs/resctrl;
* ``paths``: the tree's shape: which paths exist, and what each is;
* ``profiles``: the host profiles it can present;
* ``serve``: its server process: build the model, mount it, serve;
* ``state``: the model's data: schemas, groups, last_cmd_status, errors;
* ``taskspace``: the threads it sees, as a caller's PID namespace names them;
* ``topology``: the profile's cache topology, as sysfs files;
* ``versions``: which kernel release it behaves as, and what changed when.
"""
