"""L2 CAT: the emulated Xeon W-11865MRE, and nova-rdt on it.

The kernel's L2 rules themselves are conformance cases
(tests/conformance/catalogue/l2.yaml).  Here: the profile's topology as
the library discovers it, the library and the kernel agreeing on L2
masks, and issue 33's case 4 on the FUSE emulator: a class group made
by the agent on a host with L2 CAT, whose class is defined in L3 ways
only, with the class VMs' vCPUs in it.
"""

from __future__ import annotations

import errno
import os
import subprocess

from hypothesis import given
from hypothesis import strategies as st
import pytest

from nova_rdt import naming
from nova_rdt.cmd import main as cli
from nova_rdt.emulator import mount as emu_mount
from nova_rdt.emulator import topology
from nova_rdt.emulator.kernel import KernelError
from nova_rdt.host import prep
from nova_rdt.host.agent import Agent
from nova_rdt.resctrl import capabilities
from nova_rdt.resctrl import cbm
from nova_rdt.resctrl.schemata import Schemata
from nova_rdt.virt import config as rdt_config
from tests.hook_host import HookHost
from tests.hook_host import emulator_fixture
from tests.kernel_fixtures import KERNELS
from tests.kernel_fixtures import make_kernel
from tests.kernel_fixtures import materialize

PROFILE = "xeon-w-11865mre"
L2_FULL = 0xFFFFF              # 20 ways
L3_FULL = 0xFFF                # 12 ways
CLASS = "low"
PREFIX = "nova-rdt-"


# -- the profile, as the library sees it ------------------------------------

def test_listed_by_the_emulate_command(capsys):
    assert cli.main(["emulate", "--list-profiles"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith(PROFILE + " "))
    assert "L2 CAT" in line and "20 ways" in line and "12 ways" in line


@pytest.mark.parametrize("kernel", (KERNELS[0], KERNELS[-1]))
def test_discovery_sees_one_l2_per_core(tmp_path, kernel):
    k, _, _ = make_kernel(PROFILE, kernel=kernel)
    root = materialize(k, str(tmp_path / "resctrl"))
    cpu = topology.write_tree(k.profile, str(tmp_path / "cpu"))
    caps = capabilities.discover(root, cpu)
    l2, l3 = caps.cache["L2"], caps.cache["L3"]
    assert (l2.level, l2.cbm_mask, l2.num_closids) == (2, L2_FULL, 8)
    assert (l3.level, l3.cbm_mask, l3.num_closids) == (3, L3_FULL, 4)
    # Eight cores of two threads: CPU n and n + 8 share an L2.
    assert {i: d.cpus for i, d in l2.domains.items()} == {
        i: (i, i + 8) for i in range(8)}
    assert all(d.size == 1280 * 1024 for d in l2.domains.values())
    assert list(l3.domains) == [0] and l3.domains[0].cpus == tuple(range(16))
    assert l3.domains[0].size == 24 * 1024 * 1024
    # The kernel uses the fewest CLOSIDs of any resource: L3's 4.
    assert caps.clos_count == 4 and caps.usable_clos == 3
    assert not caps.cdp and not caps.l2_cdp


def test_cdpl2_mount_is_discovered(tmp_path):
    k, _, _ = make_kernel(PROFILE + "-cdpl2", kernel=KERNELS[-1])
    root = materialize(k, str(tmp_path / "resctrl"))
    cpu = topology.write_tree(k.profile, str(tmp_path / "cpu"))
    caps = capabilities.discover(root, cpu)
    assert caps.l2_cdp and not caps.cdp
    assert sorted(caps.cache) == ["L2CODE", "L2DATA", "L3"]
    assert caps.cache["L2CODE"].num_closids == 4


@given(st.integers(0, (1 << 21) - 1), st.integers(0, 7),
       st.sampled_from(KERNELS))
def test_library_and_kernel_agree_on_l2_masks(mask, l2_id, kernel):
    """The library's pre-write check says what the kernel says, on L2's
    20 ways and any of its eight ids."""
    k, _, _ = make_kernel(PROFILE, kernel=kernel)
    l2 = k.profile.l2
    k.mkdir("g")
    try:
        cbm.check(mask, l2.cbm_len, l2.min_cbm_bits, l2.sparse_masks)
        library = None
    except cbm.CbmError as e:
        library = str(e)
    try:
        k.write("g/schemata", f"L2:{l2_id}={mask:x}\n".encode())
        verdict = None
    except KernelError as e:
        assert e.errno == errno.EINVAL
        verdict = k.last_cmd_status().strip()
    assert library == verdict
    if verdict is None:
        shown = Schemata.parse(k.read("g/schemata"))
        assert shown.domains("L2") == {
            i: mask if i == l2_id else L2_FULL for i in range(8)}


# -- nova-rdt on the FUSE emulator (issue 33, case 4) ------------------------

emulator = emulator_fixture(PROFILE)


class L2Host(HookHost):
    """The emulated L2 part, with one class defined in L3 ways."""

    def __init__(self, workdir: str, emu: emu_mount.Emulator):
        super().__init__(workdir, emu, f"L3:0={L3_FULL:x}\n",
                         classes=(f"{CLASS}:l3_ways=1",))

    def prepare(self) -> dict:
        """What nova-compute's start writes: the host layout."""
        return prep.prepare(self.fs, self.settings.reserved_host_ways,
                            self.settings.pmd_shared_ways)

    def start(self, name: str, rdt_class: str | None = None,
              share: bool = False, l3_mask: int | None = None
              ) -> subprocess.Popen:
        """libvirt starts a domain: QEMU, its group for a plain or sharing
        VM (written from <cachetune>: an L3 line only), the hook."""
        m = rdt_config.LibvirtConfigGuestMetaNovaRdt()
        m.vcpus = {0}
        m.pmd_share = share
        m.rdt_class = rdt_class
        m.mb = []
        schemata = None if l3_mask is None else f"L3:0={l3_mask:x}\n"
        return self.launch(name, m, schemata)[0]


@pytest.fixture
def host(emulator, tmp_path):
    h = L2Host(str(tmp_path), emulator)
    h.clear()
    h.prepare()
    yield h
    h.clear()


def _class_group() -> str:
    return naming.class_group(PREFIX, CLASS)


def test_host_preparation_leaves_l2_alone(host):
    """The layout is in L3 ways: the root keeps every L2 way, and the PMD
    COS starts, like any new group, with the shareable ones: all."""
    root = host.schemata()
    assert root.domains("L3") == {0: 0x3}
    assert root.domains("L2") == {i: L2_FULL for i in range(8)}
    pmd = host.schemata(naming.pmd_group(PREFIX))
    assert pmd.domains("L3") == {0: 0xC00}
    assert pmd.domains("L2") == {i: L2_FULL for i in range(8)}


def test_class_vms_land_in_their_class_group(host):
    """Case 4: the class group is made with its one L3 way, its L2 left
    at the kernel's default for a new group, and both members' vCPUs are
    in it (before, the hook failed with "no 1 contiguous free ways on L2
    cache id 0" and the members ran in the root group)."""
    first = host.start("low1", rdt_class=CLASS)
    g = _class_group()
    s = host.schemata(g)
    l3 = s.domains("L3")[0]
    assert cbm.popcount(l3) == 1
    assert l3 & (0x3 | 0xC00) == 0        # off the host's and PMD's ways
    # rdtgroup_init_alloc(): the root's ways are shareable, so all of L2.
    assert s.domains("L2") == {i: L2_FULL for i in range(8)}
    assert first.pid in host.tasks(g)

    second = host.start("low2", rdt_class=CLASS)
    assert host.schemata(g) == s          # joined, not re-placed
    assert {first.pid, second.pid} <= host.tasks(g)
    assert first.pid not in host.tasks("") and second.pid not in host.tasks("")


def test_a_class_group_cut_short_is_narrowed_on_l3_only(host):
    """A class group made but never written (a crash after its mkdir)
    has every L3 way: the next member's start gives it one, and leaves
    L2 as the kernel made it.  Its L2 counts for nothing in that test:
    on L2 every group is as wide as the root."""
    os.mkdir(os.path.join(host.root, _class_group()))
    assert host.schemata(_class_group()).domains("L3") == {0: L3_FULL}
    member = host.start("low1", rdt_class=CLASS)
    s = host.schemata(_class_group())
    assert cbm.popcount(s.domains("L3")[0]) == 1
    assert s.domains("L3")[0] & (0x3 | 0xC00) == 0
    assert s.domains("L2") == {i: L2_FULL for i in range(8)}
    assert member.pid in host.tasks(_class_group())


def test_pmd_cos_covers_a_sharer_without_an_l2_way_of_its_own(host):
    """A sharing VM next to the PMD COS: the PMD COS stretches over its L3
    ways; on L2 it writes no more than the root's (every way), which the
    kernel accepts."""
    vm = host.start("share1", share=True, l3_mask=0x200)
    agent = Agent(host.settings)
    agent.sync_pmd(cores={1})
    pmd = host.schemata(naming.pmd_group(PREFIX))
    assert pmd.domains("L3") == {0: 0xE00}
    assert pmd.domains("L2") == {i: L2_FULL for i in range(8)}
    assert agent.last_pmd_plan is not None and not agent.last_pmd_plan.degraded
    assert vm.pid in host.tasks(f"qemu-{host.ids}-share1-vcpus_0")


def test_clos_run_out_at_l3s_four(host):
    """Root, PMD COS, one class: one CLOSID left, for one VM group; the
    next mkdir is refused as the kernel refuses it."""
    host.start("low1", rdt_class=CLASS)
    os.mkdir(os.path.join(host.root, "qemu-9-vm-vcpus_0"))
    with pytest.raises(OSError) as e:
        os.mkdir(os.path.join(host.root, "qemu-10-vm2-vcpus_0"))
    assert e.value.errno == errno.ENOSPC
    with open(os.path.join(host.root, "info", "last_cmd_status")) as f:
        assert f.read() == "Out of CLOSIDs\n"
