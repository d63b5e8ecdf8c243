"""A libvirt domain that boots the guest image directly (no disk), for
the lab's own libvirtd.  Nova writes the real guests' XML; this one is
for running the image under libvirt before Nova is involved.
"""

from __future__ import annotations

from xml.sax.saxutils import escape

from nova_rdt.lab.guest import boot
from nova_rdt.lab.guest import image as guest_image


def cpu_xml(accel: str) -> str:
    """A vCPU model with the SSE4.2 testpmd needs (libvirt's default for
    ``type='qemu'`` is qemu64, on which DPDK dies of SIGILL): libvirt's
    ``maximum`` (QEMU's ``-cpu max``) under TCG, the host's under KVM."""
    mode = "maximum" if boot.domain_type(accel) == "qemu" \
        else "host-passthrough"
    return f"<cpu mode='{mode}'/>"


def domain_xml(name: str, img: guest_image.GuestImage, role: str,
               accel: str, serial_path: str, memory_mib: int = 256,
               extra_cmdline: str = "", vcpus: int = 1) -> str:
    """``accel`` is kvm|tcg; TCG is libvirt's ``type='qemu'``.  The
    serial console goes to ``serial_path``, which
    :meth:`boot.QemuGuest.wait_ready`'s markers are read from."""
    return f"""<domain type='{boot.domain_type(accel)}'>
  <name>{escape(name)}</name>
  <memory unit='MiB'>{int(memory_mib)}</memory>
  <vcpu placement='static'>{int(vcpus)}</vcpu>
  {cpu_xml(accel)}
  {boot.direct_boot_os_xml(img, role, extra_cmdline)}
  <features><acpi/><apic/></features>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <serial type='file'>
      <source path='{escape(serial_path)}'/>
      <target port='0'/>
    </serial>
    <controller type='usb' model='none'/>
    <memballoon model='none'/>
  </devices>
</domain>
"""
