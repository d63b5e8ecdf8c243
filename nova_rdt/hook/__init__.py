"""The libvirt hook and the host agent behind it.

``hookinput`` reads libvirt's (hostile) input, ``records`` keeps what
the hook saw start, ``agent`` applies the class groups and the PMD COS
and reconciles, ``settings`` is the hook's resolved configuration and
``main`` is the entry point the ``libvirt_hooks/qemu`` shim execs.
"""
