"""Reading /proc/self/mountinfo: which mount a resctrl root is."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nova_rdt.resctrl import capabilities as caps_mod
from nova_rdt.resctrl import mounts

# proc(5)'s example, a real resctrl line (6.8, CDP) and the emulator's.
EXAMPLE = ("36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root "
           "rw,errors=continue")
RESCTRL = ("712 25 0:43 / /sys/fs/resctrl rw,relatime shared:417 - resctrl "
           "resctrl rw,cdp,mba_MBps")
EMULATOR = ("718 27 0:65 / /tmp/tmp4adkpsdq/resctrl rw,nosuid,nodev,relatime"
            " - fuse.resctrl resctrl rw,user_id=0,group_id=0,"
            "default_permissions,allow_other")


def test_a_line_as_proc5_documents_it():
    e = mounts.parse_line(EXAMPLE)
    assert e == mounts.MountEntry(
        mount_id=36, parent_id=35, device="98:0", root="/mnt1",
        mount_point="/mnt2", options=("rw", "noatime"), fstype="ext3",
        source="/dev/root", super_options=("rw", "errors=continue"))


def test_resctrl_options_are_the_superblocks():
    e = mounts.parse_line(RESCTRL)
    assert e is not None and e.fstype == "resctrl"
    assert {"cdp", "mba_MBps", "relatime"} <= e.all_options


def test_no_optional_fields_and_several():
    e = mounts.parse_line(EMULATOR)
    assert e is not None and e.fstype == "fuse.resctrl"
    many = EXAMPLE.replace("master:1", "shared:7 master:1 propagate_from:2")
    assert mounts.parse_line(many) == mounts.parse_line(EXAMPLE)


def test_what_is_not_a_line():
    for bad in ("", "36 35 98:0 /mnt1 /mnt2 rw",          # truncated read
                "x 35 98:0 / /m rw - ext3 /dev/root rw",  # no mount ID
                "36 35 98:0 / /m rw - ext3"):             # no options
        assert mounts.parse_line(bad) is None
    assert mounts.parse("garbage\n" + EXAMPLE + "\n") == \
        [mounts.parse_line(EXAMPLE)]


def test_escaped_paths():
    line = EXAMPLE.replace("/mnt2", r"/a\040b\011c\134d")
    e = mounts.parse_line(line)
    assert e is not None and e.mount_point == "/a b\tc\\d"


@given(st.text(st.characters(codec="utf-8", exclude_characters="\x00"),
               max_size=40))
def test_escape_round_trip(path):
    escaped = mounts.escape(path)
    assert not any(c in escaped for c in " \t\n")
    assert mounts.unescape(escaped) == path


def test_the_last_mount_stacked_on_a_point_is_seen():
    under = mounts.parse_line(RESCTRL)
    over = mounts.parse_line(RESCTRL.replace("712", "800").replace(
        ",cdp", ""))
    other = mounts.parse_line(EXAMPLE)
    assert under and over and other
    assert mounts.entry_for([under, other, over], "/sys/fs/resctrl") is over
    assert mounts.entry_for([under, other], "/sys/fs") is None


def test_entry_at_resolves_the_path(tmp_path, monkeypatch):
    real = tmp_path / "mnt"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    info = tmp_path / "mountinfo"
    info.write_text(EXAMPLE.replace("/mnt2", mounts.escape(str(real))) + "\n")
    monkeypatch.setattr(mounts, "MOUNTINFO", str(info))
    e = mounts.entry_at(str(tmp_path / "link"))
    assert e is not None and e.mount_id == 36
    assert mounts.entry_at(str(tmp_path)) is None
    assert caps_mod.mount_options(str(real)) == {
        "rw", "noatime", "errors=continue"}
    monkeypatch.setattr(mounts, "MOUNTINFO", str(tmp_path / "missing"))
    assert mounts.entry_at(str(real)) is None
    assert caps_mod.mount_options(str(real)) == set()
