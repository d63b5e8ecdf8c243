"""The emulator's kernel rules, and the model's own machinery.

Each test names the kernel function whose behaviour it mirrors, and checks
the errno and the exact ``info/last_cmd_status`` text that function
produces, on the release named (``make_kernel`` defaults to 6.1).  The
single-step rules, on every supported release, are the conformance
catalogue's (tests/conformance); here are the stateful ones and the model's
machinery: PID namespaces, fork inheritance, counters, pseudo-locking.
"""

import errno

from hypothesis import given
from hypothesis import strategies as st
import pytest

from nova_rdt.emulator.kernel import U32_MAX
from nova_rdt.emulator.kernel import KernelError
from tests.kernel_fixtures import expect_error
from tests.kernel_fixtures import make_kernel


def schemata(k, group=""):
    return k.read(f"{group}/schemata" if group else "schemata")


def write(k, path, text, caller=0):
    return k.write(path, text.encode(), caller)


# -- info/ and formats ---------------------------------------------------

def test_info_files_of_gold_6252():
    k, _, _ = make_kernel(kernel="6.8")
    assert k.read("info/L3/cbm_mask") == "7ff\n"
    assert k.read("info/L3/num_closids") == "16\n"
    assert k.read("info/L3/min_cbm_bits") == "1\n"
    assert k.read("info/L3/shareable_bits") == "0\n"
    assert k.read("info/L3/sparse_masks") == "0\n"
    assert k.read("info/MB/num_closids") == "8\n"
    assert k.read("info/MB/bandwidth_gran") == "10\n"
    assert k.read("info/MB/min_bandwidth") == "10\n"
    assert k.read("info/MB/delay_linear") == "1\n"
    assert k.read("info/MB/thread_throttle_mode") == "max\n"
    assert k.read("info/L3_MON/mon_features") == \
        "llc_occupancy\nmbm_total_bytes\nmbm_local_bytes\n"
    assert k.read("info/last_cmd_status") == "ok\n"


def test_schemata_show_pads_like_show_doms():
    # show_doms(): "%*s:" with max_name_width (+4 when CDP-capable but
    # off) and values padded to max_data_width; MB listed before L3
    # because schemata_list_add() inserts at the head.
    k, _, _ = make_kernel()
    assert schemata(k) == "    MB:0=100;1=100\n    L3:0=7ff;1=7ff\n"
    write(k, "schemata", "MB:0=10\n")
    assert schemata(k) == "    MB:0= 10;1=100\n    L3:0=7ff;1=7ff\n"


def test_schemata_show_20_way_haswell_without_cdp():
    k, _, _ = make_kernel("e5-2658-v3")
    assert schemata(k) == "L3:0=fffff;1=fffff\n"


def test_cdp_mount_halves_closids_and_splits_l3():
    # schemata_list_create(): L3CODE + L3DATA, each with num_closid / 2.
    k, _, _ = make_kernel("gold-6252-cdp")
    assert k.read("info/L3CODE/num_closids") == "8\n"
    assert k.read("info/L3DATA/num_closids") == "8\n"
    assert "L3" not in k.listdir("info")
    assert schemata(k) == \
        "    MB:0=100;1=100\nL3DATA:0=7ff;1=7ff\nL3CODE:0=7ff;1=7ff\n"


def test_cpus_mask_format_is_bitmap_string():
    # "%*pb": 32-bit chunks, the first padded to the leftover width.
    k, _, _ = make_kernel()                          # 96 CPUs
    assert k.read("cpus") == "ffffffff,ffffffff,ffffffff\n"
    assert k.read("cpus_list") == "0-95\n"


# -- cbm_validate() / parse_cbm() -----------------------------------------

def test_non_consecutive_mask_is_refused():
    k, _, _ = make_kernel()
    k.mkdir("g")
    expect_error(k, errno.EINVAL,
                 "The mask 5 has non-consecutive 1-bits\n",
                 write, k, "g/schemata", "L3:0=5\n")
    assert schemata(k, "g").endswith("L3:0=7ff;1=7ff\n")   # nothing applied


def test_sparse_masks_are_accepted_on_amd():
    k, _, _ = make_kernel("amd-epyc")
    k.mkdir("g")
    write(k, "g/schemata", "L3:0=5\n")
    assert "L3:0=0005" in schemata(k, "g")


def test_min_cbm_bits_haswell_needs_two():
    k, _, _ = make_kernel("e5-2658-v3")
    k.mkdir("g")
    expect_error(k, errno.EINVAL, "Need at least 2 bits in the mask\n",
                 write, k, "g/schemata", "L3:0=1\n")


@pytest.mark.parametrize("mask", ["0", "800", "fffff"])
def test_mask_out_of_range(mask):
    k, _, _ = make_kernel()
    k.mkdir("g")
    expect_error(k, errno.EINVAL, "Mask out of range\n",
                 write, k, "g/schemata", f"L3:0={mask}\n")


def test_non_hex_mask():
    k, _, _ = make_kernel()
    k.mkdir("g")
    expect_error(k, errno.EINVAL, "Non-hex character in the mask 7fg\n",
                 write, k, "g/schemata", "L3:0=7fg\n")


def test_0x_prefix_is_accepted_by_kstrtoul():
    k, _, _ = make_kernel()
    k.mkdir("g")
    write(k, "g/schemata", "L3:0=0x3\n")
    assert "L3:0=003" in schemata(k, "g")


def test_exclusive_group_blocks_overlap():
    # rdtgroup_cbm_overlaps(..., exclusive=true).
    k, _, _ = make_kernel()
    write(k, "schemata", "L3:0=7;1=7\n")
    k.mkdir("ex")
    write(k, "ex/schemata", "L3:0=600;1=600\n")
    k.mkdir("other")
    write(k, "other/schemata", "L3:0=18;1=18\n")
    write(k, "ex/mode", "exclusive\n")
    assert k.read("ex/mode") == "exclusive\n"
    expect_error(k, errno.EINVAL, "Overlaps with exclusive group\n",
                 write, k, "other/schemata", "L3:0=300\n")
    expect_error(k, errno.EINVAL, "Overlaps with other group\n",
                 write, k, "ex/schemata", "L3:0=70\n")


def test_exclusive_mode_refused_while_overlapping():
    # rdtgroup_mode_test_exclusive(): the new group overlaps the root.
    k, _, _ = make_kernel()
    k.mkdir("g")
    expect_error(k, errno.EINVAL, "Schemata overlaps\n",
                 write, k, "g/mode", "exclusive\n")
    expect_error(k, errno.EINVAL, "Unknown or unsupported mode\n",
                 write, k, "g/mode", "pseudo-locked\n")


def test_mode_needs_trailing_newline_without_message():
    k, _, _ = make_kernel()
    k.mkdir("g")
    expect_error(k, errno.EINVAL, None, write, k, "g/mode", "shareable")


# -- rdtgroup_schemata_write() / parse_line() -----------------------------

def test_trailing_newline_required_and_status_untouched():
    k, _, _ = make_kernel()
    k.mkdir("g")
    expect_error(k, errno.EINVAL, "Mask out of range\n",
                 write, k, "g/schemata", "L3:0=0\n")
    # No newline: -EINVAL before rdt_last_cmd_clear(), so the old text stays.
    expect_error(k, errno.EINVAL, "Mask out of range\n",
                 write, k, "g/schemata", "L3:0=3")


def test_unknown_resource():
    k, _, _ = make_kernel("e7-8890-v4")            # no MBA
    k.mkdir("g")
    expect_error(k, errno.EINVAL,
                 "Unknown or unsupported resource name 'MB'\n",
                 write, k, "g/schemata", "MB:0=50\n")


def test_duplicate_domain():
    k, _, _ = make_kernel()
    k.mkdir("g")
    expect_error(k, errno.EINVAL, "Duplicate domain 0\n",
                 write, k, "g/schemata", "L3:0=3;0=7\n")


def test_unknown_domain_fails_without_message():
    k, _, _ = make_kernel()
    k.mkdir("g")
    expect_error(k, errno.EINVAL, "ok\n", write, k, "g/schemata", "L3:7=3\n")


@pytest.mark.parametrize("text, status", [
    ("L3\n", "Missing ':'\n"),
    ("L3:\n", "Missing 'L3' value\n"),
    ("L3:x=3\n", "Missing '=' or non-numeric domain\n"),
    ("L3:0\n", "Missing '=' or non-numeric domain\n"),
])
def test_line_syntax_errors(text, status):
    k, _, _ = make_kernel()
    k.mkdir("g")
    expect_error(k, errno.EINVAL, status, write, k, "g/schemata", text)


def test_all_or_nothing():
    k, _, _ = make_kernel()
    k.mkdir("g")
    expect_error(k, errno.EINVAL, "MB value 5 out of range [10,100]\n",
                 write, k, "g/schemata", "L3:0=3\nMB:0=5\n")
    assert schemata(k, "g") == "    MB:0=100;1=100\n    L3:0=7ff;1=7ff\n"


def test_partial_update_keeps_other_lines_and_domains():
    k, _, _ = make_kernel()
    k.mkdir("g")
    write(k, "g/schemata", "L3:1=3\n")
    assert schemata(k, "g") == "    MB:0=100;1=100\n    L3:0=7ff;1=003\n"


# -- bw_validate() ---------------------------------------------------------

@pytest.mark.parametrize("value, kept", [("10", 10), ("11", 20), ("95", 100),
                                         ("100", 100)])
def test_mb_rounds_up_to_granularity(value, kept):
    k, _, _ = make_kernel()
    k.mkdir("g")
    write(k, "g/schemata", f"MB:0={value}\n")
    assert f"MB:0={kept:>3}" in schemata(k, "g")


@pytest.mark.parametrize("value", ["9", "0", "101"])
def test_mb_out_of_range(value):
    k, _, _ = make_kernel()
    k.mkdir("g")
    expect_error(k, errno.EINVAL, f"MB value {value} out of range [10,100]\n",
                 write, k, "g/schemata", f"MB:0={value}\n")


@pytest.mark.parametrize("kernel, status", [
    ("6.1", "Non-decimal digit in MB value lots\n"),
    ("6.16", "Invalid MB value lots\n")])
def test_mb_not_a_number(kernel, status):
    k, _, _ = make_kernel(kernel=kernel)
    k.mkdir("g")
    expect_error(k, errno.EINVAL, status,
                 write, k, "g/schemata", "MB:0=lots\n")


def test_amd_mb_units_go_to_2048():
    k, _, _ = make_kernel("amd-epyc")
    assert k.read("info/MB/delay_linear") == "0\n"
    assert "thread_throttle_mode" not in k.listdir("info/MB")
    k.mkdir("g")
    write(k, "g/schemata", "MB:0=1024\n")
    assert "MB:0=1024" in schemata(k, "g")
    expect_error(k, errno.EINVAL, "MB value 4096 out of range [0,2048]\n",
                 write, k, "g/schemata", "MB:0=4096\n")


def test_mba_mbps_takes_any_u32_and_starts_at_max():
    k, _, _ = make_kernel("gold-6252-mbps", kernel="6.14")
    k.mkdir("g")
    assert f"MB:0={U32_MAX}" in schemata(k, "g")
    write(k, "g/schemata", "MB:0=5000\n")
    assert "MB:0=5000" in schemata(k, "g")
    assert "mba_MBps_event" in k.listdir("g")


# -- mkdir / rmdir -------------------------------------------------------

def test_out_of_closids_is_the_minimum_over_resources():
    # closid_alloc() fails: 16 CLOSIDs for L3 but only 8 for MB on the
    # Gold 6252, so the limit is min(16, 8) - 1 = 7 groups.
    k, _, _ = make_kernel()
    for i in range(7):
        k.mkdir(f"g{i}")
    expect_error(k, errno.ENOSPC, "Out of CLOSIDs\n", k.mkdir, "g7")


def test_closids_are_reused_after_rmdir():
    k, _, _ = make_kernel("e7-8890-v4")
    for i in range(15):
        k.mkdir(f"g{i}")
    expect_error(k, errno.ENOSPC, "Out of CLOSIDs\n", k.mkdir, "x")
    k.rmdir("g3")
    k.mkdir("x")


def test_new_group_gets_shareable_and_unused_lowest_run():
    # __init_one_rdt_domain() + cbm_ensure_valid().
    k, _, _ = make_kernel()
    write(k, "schemata", "L3:0=7;1=7\n")
    k.mkdir("a")
    write(k, "a/schemata", "L3:0=78;1=78\n")
    k.mkdir("b")
    # Root's 7 and a's 78 are shareable and offered; 780 unused: all 7ff.
    assert schemata(k, "b").endswith("L3:0=7ff;1=7ff\n")


def test_new_group_skips_exclusive_ways():
    k, _, _ = make_kernel()
    write(k, "schemata", "L3:0=3;1=3\n")
    k.mkdir("ex")
    write(k, "ex/schemata", "L3:0=c;1=c\n")
    write(k, "ex/mode", "exclusive\n")
    k.mkdir("b")
    # Offered: root's 3 + unused 7f0; ex's c splits them; lowest run kept.
    assert schemata(k, "b").endswith("L3:0=003;1=003\n")


def test_mkdir_rules():
    k, _, _ = make_kernel()
    k.mkdir("g")
    expect_error(k, errno.EEXIST, None, k.mkdir, "g")
    expect_error(k, errno.EPERM, None, k.mkdir, "g/sub")
    expect_error(k, errno.EINVAL, None, k.mkdir, "bad\nname")
    k.mkdir("g/mon_groups/m")
    expect_error(k, errno.EPERM, None, k.mkdir, "g/mon_groups/mon_groups")


def test_out_of_rmids_busy_while_in_limbo():
    # alloc_rmid(): EBUSY while freed RMIDs wait in limbo, else ENOSPC.
    # (6.16: mkdir_rdt_prepare() clears the status before each attempt.)
    k, clock, _ = make_kernel("e5-2658-v3", kernel="6.16")
    for i in range(63):
        k.mkdir(f"mon_groups/m{i}")
    expect_error(k, errno.ENOSPC, "Out of RMIDs\n", k.mkdir, "mon_groups/x")
    k.rmdir("mon_groups/m0")
    expect_error(k, errno.EBUSY, "Out of RMIDs\n", k.mkdir, "mon_groups/x")
    clock.advance(2)
    k.mkdir("mon_groups/x")


def test_rmdir_hands_tasks_and_cpus_back():
    k, _, _ = make_kernel(kernel="6.8")
    k.mkdir("g")
    write(k, "g/cpus_list", "2-3\n")
    write(k, "g/tasks", "101,102")
    k.mkdir("g/mon_groups/m")
    write(k, "g/mon_groups/m/tasks", "102")
    assert k.read("g/tasks") == "101\n102\n"
    assert "2" not in k.read("cpus_list").split(",")
    k.rmdir("g")
    assert k.read("tasks") == "101\n102\n103\n"
    assert k.read("cpus_list") == "0-95\n"


def test_rmdir_of_monitor_group_returns_tasks_to_parent():
    k, _, _ = make_kernel(kernel="6.8")
    k.mkdir("g")
    write(k, "g/tasks", "101,102")
    k.mkdir("g/mon_groups/m")
    write(k, "g/mon_groups/m/tasks", "102")
    k.rmdir("g/mon_groups/m")
    assert k.read("g/tasks") == "101\n102\n"


def test_rmdir_refuses_non_groups():
    k, _, _ = make_kernel()
    k.mkdir("g")
    expect_error(k, errno.EPERM, None, k.rmdir, "info")
    expect_error(k, errno.EPERM, None, k.rmdir, "g/mon_groups")
    expect_error(k, errno.EPERM, None, k.rmdir, "g/mon_data")


# -- tasks / cpus ------------------------------------------------------------

def test_tasks_move_between_groups():
    k, _, _ = make_kernel()
    k.mkdir("a")
    k.mkdir("b")
    write(k, "a/tasks", "101")                      # libvirt: no newline
    write(k, "b/tasks", "101\n")
    assert k.read("a/tasks") == "" and k.read("b/tasks") == "101\n"
    write(k, "tasks", "101\n")
    assert k.read("b/tasks") == ""


def test_missing_task():
    # rdtgroup_move_task(): ESRCH, and the two stacked messages.
    k, _, _ = make_kernel(kernel="6.8")
    k.mkdir("g")
    expect_error(k, errno.ESRCH,
                 "No task 999\nError while processing task 999\n",
                 write, k, "g/tasks", "101,999,102")
    assert k.read("g/tasks") == "101\n"            # earlier ids stay moved


def test_task_list_parsing_error():
    k, _, _ = make_kernel(kernel="6.8")
    expect_error(k, errno.EINVAL, "Task list parsing error pid abc\n",
                 write, k, "tasks", "abc\n")


def test_monitor_group_cannot_take_another_groups_task():
    k, _, _ = make_kernel(kernel="6.8")
    k.mkdir("a")
    k.mkdir("b")
    k.mkdir("b/mon_groups/m")
    write(k, "a/tasks", "101")
    expect_error(k, errno.EINVAL,
                 "Can't move task to different control group\n"
                 "Error while processing task 101\n",
                 write, k, "b/mon_groups/m/tasks", "101")


def test_cpus_move_and_rules():
    # cpus_ctrl_write() / cpus_mon_write(); 6.16 clears the status first.
    k, _, _ = make_kernel(kernel="6.16")
    k.mkdir("a")
    k.mkdir("b")
    write(k, "a/cpus_list", "0-3\n")
    write(k, "b/cpus", "c\n")                       # CPUs 2,3 move to b
    assert k.read("a/cpus_list") == "0-1\n"
    assert k.read("b/cpus_list") == "2-3\n"
    assert k.read("b/cpus") == "00000000,00000000,0000000c\n"
    expect_error(k, errno.EINVAL, "Can't drop CPUs from default group\n",
                 write, k, "cpus_list", "0\n")
    expect_error(k, errno.ERANGE, "Bad CPU list/mask\n",
                 write, k, "a/cpus_list", "200\n")
    k.mkdir("a/mon_groups/m")
    expect_error(k, errno.EINVAL,
                 "Can only add CPUs to mongroup that belong to parent\n",
                 write, k, "a/mon_groups/m/cpus_list", "5\n")
    write(k, "a/mon_groups/m/cpus_list", "1\n")
    write(k, "a/cpus_list", "0-1,8\n")              # clears the monitor's
    assert k.read("a/mon_groups/m/cpus_list") == "\n"


# -- monitoring ------------------------------------------------------------

def test_counters_move_while_tasks_run_and_sum_children():
    k, clock, _ = make_kernel(kernel="6.8")
    k.mkdir("g")
    k.mkdir("g/mon_groups/m")
    write(k, "g/tasks", "101,102")
    write(k, "g/mon_groups/m/tasks", "102")
    before = int(k.read("g/mon_data/mon_L3_00/mbm_total_bytes"))
    clock.advance(1.0)
    total = int(k.read("g/mon_data/mon_L3_00/mbm_total_bytes"))
    child = int(k.read("g/mon_groups/m/mon_data/mon_L3_00/mbm_total_bytes"))
    local = int(k.read("g/mon_data/mon_L3_00/mbm_local_bytes"))
    occ = int(k.read("g/mon_data/mon_L3_00/llc_occupancy"))
    assert total > before and 0 < child < total
    assert 0 < local < total and occ > 0
    # An idle group's counters stand still.
    k.mkdir("idle")
    clock.advance(1.0)
    assert k.read("idle/mon_data/mon_L3_01/mbm_total_bytes") == "0\n"


def test_mba_throttle_slows_bandwidth():
    k, clock, _ = make_kernel()
    k.mkdir("fast")
    k.mkdir("slow")
    write(k, "slow/schemata", "MB:0=10;1=10\n")
    write(k, "fast/tasks", "101")
    write(k, "slow/tasks", "102")
    clock.advance(2.0)
    fast = int(k.read("fast/mon_data/mon_L3_00/mbm_total_bytes"))
    slow = int(k.read("slow/mon_data/mon_L3_00/mbm_total_bytes"))
    assert 8 * slow < fast < 12 * slow


def test_unavailable_reading():
    k, _, _ = make_kernel()
    k.mkdir("g")
    k.unavailable.add(("g", 1, "mbm_local_bytes"))
    assert k.read("g/mon_data/mon_L3_01/mbm_local_bytes") == "Unavailable\n"


def test_bit_usage():
    # rdt_bit_usage_show(): S shareable, E exclusive, 0 unused.
    k, _, _ = make_kernel()
    write(k, "schemata", "L3:0=3;1=3\n")
    k.mkdir("ex")
    write(k, "ex/schemata", "L3:0=c;1=30\n")
    write(k, "ex/mode", "exclusive\n")
    assert k.read("info/L3/bit_usage") == \
        "0=0000000EESS;1=00000EE00SS\n"


# -- releases, parsers, dispatch ---------------------------------------------

def test_kernel_versions_parse_and_refuse_clearly(monkeypatch):
    from nova_rdt.emulator import versions
    assert str(versions.parse("6.8")) == "6.8"
    assert str(versions.parse("6.1.0-18-amd64")) == "6.1"
    assert versions.parse("6.16") > versions.parse("6.8")
    with pytest.raises(versions.VersionError, match="older than"):
        versions.parse("5.10")
    with pytest.raises(versions.VersionError, match="not of the form"):
        versions.parse("six")
    monkeypatch.setenv(versions.ENV, "5.15")
    assert str(versions.default()) == "5.15"
    monkeypatch.delenv(versions.ENV)
    monkeypatch.setattr(versions.os, "uname",
                        lambda: type("u", (), {"release": "4.19.0-9"})())
    assert str(versions.default()) == versions.FALLBACK
    monkeypatch.setattr(versions.os, "uname",
                        lambda: type("u", (), {"release": "6.12.3"})())
    assert str(versions.default()) == "6.12"


def test_every_group_file_has_a_handler():
    from nova_rdt.emulator import kernel
    from nova_rdt.emulator import paths
    for profile in ("gold-6252-mbps", "e7-8890-v4"):
        k, _, _ = make_kernel(profile, kernel="6.16")
        k.mkdir("g")
        for g in (k.root, k.groups["g"]):
            for name in paths.group_files(k, g):
                assert name in kernel.GROUP_FILES
                k.read(f"{g.name}/{name}".lstrip("/"))


@given(st.sets(st.integers(0, 95)))
def test_cpulist_and_cpumask_round_trip(cpus):
    from nova_rdt.emulator import kparse
    assert kparse.parse_cpulist(kparse.format_cpulist(cpus), 96) == cpus
    assert kparse.parse_cpumask(kparse.format_cpumask(cpus, 96), 96) == cpus


@pytest.mark.parametrize("text, want", [
    ("0", 0), ("+7", 7), ("0x10", 16), ("010", 8), ("-3", -3),
    ("08", None), ("0x", None), ("", None), ("1 2", None),
    ("2147483648", None), ("-+1", None), ("5\n", 5)])
def test_kstrtoint_base_0(text, want):
    from nova_rdt.emulator import kparse
    assert kparse.kstrtoint(text, 0) == want


# -- the model's task machinery ----------------------------------------------

def test_threads_present_at_start_stay_in_the_root():
    """Only threads new since the last look inherit: what existed when the
    model first looked was forked before any move."""
    k, _, tasks = make_kernel(kernel="6.8")
    tasks.fork(101, 104)
    k.mkdir("g")
    write(k, "g/tasks", "101")
    assert k.read("g/tasks") == "101\n"
    tasks.fork(101, 105)
    tasks.fork(105, 106)                      # a grandchild, both new
    assert k.read("g/tasks") == "101\n105\n106\n"
    write(k, "tasks", "101")
    assert k.read("g/tasks") == "105\n106\n"   # children stay put


def test_rmdir_forgets_inherited_members():
    k, _, tasks = make_kernel(kernel="6.8")
    k.mkdir("g")
    write(k, "g/tasks", "101")
    tasks.fork(101, 104)
    assert k.read("g/tasks") == "101\n104\n"
    k.rmdir("g")
    assert k.read("tasks") == "101\n102\n103\n104\n"


def test_host_tasks_in_the_servers_own_namespace():
    import os

    from nova_rdt.emulator.taskspace import HostTasks
    h = HostTasks()
    me = os.getpid()
    assert h.resolve(me, me) == me and h.vnr(me, me) == me
    assert h.tids()[me] == me
    t = h.info(me)
    assert t.parent == os.getppid() and t.leader == me and t.start > 0
    assert h.resolve(me, 2 ** 22 + 7) is None


def test_status_buffer_keeps_512_bytes():
    # Before 6.16 cpus writes append; seq_buf_puts() stores a message only
    # while it fits with its NUL: 28 of these 18-byte ones.
    k, _, _ = make_kernel(kernel="6.1")
    for _ in range(40):
        with pytest.raises(KernelError):
            write(k, "cpus_list", "x\n")
    text = k.last_cmd_status()
    assert len(text) < 512 and text.count("Bad CPU list/mask\n") == 28
