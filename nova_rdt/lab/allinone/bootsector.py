"""The cloud's guest where a Linux kernel cannot run: a raw disk whose
boot sector prints one line on the serial port and halts.

The sector is a well-formed MBR: the program and its message, then a
partition table with one partition (type 0xDA, "non-FS data") over the
rest of the disk, then the 0x55AA signature.  Glance's image-format
safety check (oslo.utils' format inspector) refuses an MBR that defines
no partition, with 415 "Unsupported Media Type".

This machine's KVM (PVM) hangs a stock kernel once it leaves real mode,
but SeaBIOS and real-mode code run under it.  Nova boots this disk as it
boots any raw image: SeaBIOS loads sector 0 from the virtio disk and
jumps to it; the program writes :data:`MESSAGE` to COM1 (which Nova's
domain routes to the instance's ``console.log``) and halts with
interrupts off, so its vCPU sleeps instead of spinning.  The domain runs
as long as Nova keeps it, with its vCPU threads in the resctrl group
libvirt made from Nova's ``<cachetune>``.

The program, 16-bit, loaded at 0x7c00 (the bytes of :data:`_CODE`)::

    cli
    xor  ax, ax
    mov  ds, ax
    cld
    mov  si, 0x7c00 + len(_CODE)    ; the message follows the code
    mov  dx, 0x3f8                  ; COM1's transmit register
  next:
    lodsb
    test al, al
    jz   halt
    out  dx, al
    jmp  next
  halt:
    hlt
    jmp  halt
"""

from __future__ import annotations

#: What the guest prints (the cloud's console check looks for it).
MESSAGE = "nova-rdt-guest: boot sector running"
LOAD_ADDRESS = 0x7C00
SECTOR = 512
#: Where the MBR's partition table starts (four 16-byte entries).
PARTITION_TABLE = 446
PARTITION_TYPE = 0xDA
_SIGNATURE = b"\x55\xaa"


def _code(message_at: int) -> bytes:
    return bytes([
        0xFA,                           # cli
        0x31, 0xC0,                     # xor ax, ax
        0x8E, 0xD8,                     # mov ds, ax
        0xFC,                           # cld
        0xBE, *message_at.to_bytes(2, "little"),  # mov si, imm16
        0xBA, 0xF8, 0x03,               # mov dx, 0x3f8
        0xAC,                           # next: lodsb
        0x84, 0xC0,                     # test al, al
        0x74, 0x03,                     # jz halt (+3)
        0xEE,                           # out dx, al
        0xEB, 0xF8,                     # jmp next (-8)
        0xF4,                           # halt: hlt
        0xEB, 0xFD,                     # jmp halt (-3)
    ])


_CODE_LEN = len(_code(0))


def _partition_entry(sectors: int) -> bytes:
    """One MBR entry from LBA 1 to the disk's end.  The CHS fields say
    (0, 0, 2) for the start and "beyond CHS" (0xFE 0xFF 0xFF) for the
    end, as partitioning tools write them for LBA-addressed disks."""
    if sectors < 2:
        raise ValueError("the disk needs a sector beyond the MBR")
    return (bytes([0x00, 0x00, 0x02, 0x00, PARTITION_TYPE,
                   0xFE, 0xFF, 0xFF])
            + (1).to_bytes(4, "little")
            + min(sectors - 1, 0xFFFFFFFF).to_bytes(4, "little"))


def boot_sector(message: str = MESSAGE, disk_sectors: int = 2048) -> bytes:
    """Sector 0 of a ``disk_sectors``-sector disk: the program, the
    message (CR LF, NUL-terminated), the partition table and the boot
    signature SeaBIOS checks."""
    text = (message + "\r\n").encode("ascii") + b"\0"
    if b"\0" in text[:-1]:
        raise ValueError("the message must not hold a NUL")
    body = _code(LOAD_ADDRESS + _CODE_LEN) + text
    if len(body) > PARTITION_TABLE:
        raise ValueError(f"the message is {len(body) - PARTITION_TABLE} "
                         f"bytes too long for a boot sector")
    table = _partition_entry(disk_sectors) + b"\0" * 48
    return (body + b"\0" * (PARTITION_TABLE - len(body)) + table
            + _SIGNATURE)


def write_disk(path: str, size_mib: int = 1,
               message: str = MESSAGE) -> str:
    """A raw disk of ``size_mib`` MiB with :func:`boot_sector` first."""
    if size_mib < 1:
        raise ValueError(f"size_mib must be >= 1, not {size_mib!r}")
    size = size_mib << 20
    with open(path, "wb") as f:
        f.write(boot_sector(message, size // SECTOR))
        f.truncate(size)
    return path
