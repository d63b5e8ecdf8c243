"""The lab's real Linux guest: a Debian cloud kernel and a busybox
initramfs that either forwards between its two NICs or makes noise.

``image`` finds and assembles the image (tools/build-guest-image.sh
runs it at set-up), ``cpio`` and ``kmod`` are its pure parts, ``boot``
runs it under QEMU and decides between KVM and TCG.
"""
