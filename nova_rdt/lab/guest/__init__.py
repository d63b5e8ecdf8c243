"""The lab's real Linux guest: a Debian cloud kernel and a busybox
initramfs that either forwards between its two NICs (testpmd, else the
kernel bridge) or makes noise (memtester, else the stressor).

``image`` finds and assembles the image (tools/build-guest-image.sh
runs it at set-up), ``userland`` fetches testpmd, memtester and the
library packages they need, ``cpio``, ``kmod`` and ``elfdeps`` are
their pure parts, ``boot`` runs it under QEMU and decides between KVM
and TCG, ``frames`` and ``rate`` measure what crosses a forwarder.
"""
