"""The cloud's boot-sector guest: the sector's layout, decoded back.
(A real QEMU boots it in tests/integration/test_lab_cloud.py.)"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
import pytest

from nova_rdt.lab.allinone import bootsector

_PRINTABLE = st.text(alphabet=st.characters(min_codepoint=0x20,
                                            max_codepoint=0x7E),
                     max_size=200)


def _decode(sector: bytes) -> tuple[int, bytes]:
    """(the address ``mov si`` loads, the NUL-terminated bytes there)."""
    assert sector[6] == 0xBE                      # mov si, imm16
    si = int.from_bytes(sector[7:9], "little")
    at = si - bootsector.LOAD_ADDRESS
    end = sector.index(b"\0", at)
    return si, sector[at:end]


def test_a_sector_seabios_boots_and_glance_takes():
    sector = bootsector.boot_sector()
    assert len(sector) == 512
    assert sector[510:] == b"\x55\xaa"


def test_the_partition_table_passes_glances_format_inspector(tmp_path):
    """oslo.utils' inspector, as Glance runs it on upload: an MBR with
    no partition is refused (415), this one is taken."""
    from oslo_utils.imageutils import format_inspector as fi
    path = bootsector.write_disk(str(tmp_path / "disk.raw"))
    inspector = fi.detect_file_format(path)
    assert inspector.NAME == "gpt"    # what an MBR is to the inspector
    inspector.safety_check()          # raises SafetyCheckFailed if refused
    bare = bytearray(open(path, "rb").read(512))
    bare[446:510] = b"\0" * 64
    (tmp_path / "bare.raw").write_bytes(bytes(bare) + b"\0" * 4096)
    with pytest.raises(fi.SafetyCheckFailed):
        fi.detect_file_format(str(tmp_path / "bare.raw")).safety_check()


@pytest.mark.parametrize("sectors", [2, 2048, 1 << 40])
def test_one_partition_from_lba_1_to_the_end(sectors):
    entry = bootsector.boot_sector(disk_sectors=sectors)[446:462]
    assert entry[0] == 0 and entry[4] == bootsector.PARTITION_TYPE
    assert int.from_bytes(entry[8:12], "little") == 1
    assert int.from_bytes(entry[12:16], "little") == min(sectors - 1,
                                                         0xFFFFFFFF)
    assert bootsector.boot_sector(disk_sectors=sectors)[462:510] == \
        b"\0" * 48


@given(_PRINTABLE)
def test_the_program_prints_the_message_that_follows_it(message):
    try:
        sector = bootsector.boot_sector(message)
    except ValueError as e:
        assert "too long" in str(e)
        assert len(message) > 400
        return
    si, text = _decode(sector)
    assert text == (message + "\r\n").encode()
    # The message starts right after the code, inside the sector.
    assert si == bootsector.LOAD_ADDRESS + bootsector._CODE_LEN
    assert sector[510:] == b"\x55\xaa"


def test_jumps_land_on_the_loop_and_the_halt():
    code = bootsector.boot_sector()[:bootsector._CODE_LEN]
    lodsb, jz, jmp_next, hlt, jmp_halt = (code.index(b"\xac"),
                                          code.index(b"\x74"),
                                          code.index(b"\xeb"),
                                          code.index(b"\xf4"),
                                          code.rindex(b"\xeb"))
    rel = lambda at: int.from_bytes(code[at + 1:at + 2], "little",  # noqa: E731
                                    signed=True)
    assert jz + 2 + rel(jz) == hlt
    assert jmp_next + 2 + rel(jmp_next) == lodsb
    assert jmp_halt + 2 + rel(jmp_halt) == hlt
    assert code[0] == 0xFA  # cli: the hlt never wakes


def test_a_disk_of_one_sector_is_refused():
    with pytest.raises(ValueError, match="beyond the MBR"):
        bootsector.boot_sector(disk_sectors=1)


@pytest.mark.parametrize("message, error", [
    ("x" * 430, "too long"),
    ("a\0b", "NUL"),
])
def test_bad_messages_are_refused(message, error):
    with pytest.raises(ValueError, match=error):
        bootsector.boot_sector(message)


def test_write_disk(tmp_path):
    path = bootsector.write_disk(str(tmp_path / "d.raw"), 2)
    data = open(path, "rb").read()
    assert len(data) == 2 << 20
    assert data[:512] == bootsector.boot_sector(disk_sectors=4096)
    assert data[512:] == b"\0" * ((2 << 20) - 512)
    with pytest.raises(ValueError):
        bootsector.write_disk(str(tmp_path / "e.raw"), 0)
