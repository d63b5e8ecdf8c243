"""The test double of libvirt's allocator (:mod:`tests.libvirt_model`),
held equal to the real libvirtd 9.0 on the same emulated hosts.

Nova's functional tests run fakelibvirt with that double; this module is
what keeps the double honest.  Each case sets a host up (the default
group shrunk to the host's ways, groups of other tools), reads the state
the double plans on, then starts a diskless kvm domain with the case's
``<cachetune>``/``<memorytune>`` on the lab's real libvirtd.  The groups
libvirt made (names and masks) must be what the double planned, and a
start libvirt refuses must be one the double refuses with libvirt's
words.  Cases: MB beside a group at MB 100 (where the double was wrong),
two MB domains over 100% together, CDP, a full cache and a fragmented
one, and two cachetunes in one domain.
"""

from __future__ import annotations

import dataclasses
import os
import shutil

import pytest

from nova_rdt.lab import diskless_domain_xml
from nova_rdt.lab.libvirtd import VirshError
from nova_rdt.resctrl.schemata import Schemata
from tests import libvirt_model
from tests.integration import hooklab
from tests.integration.conftest import prepared_lab

#: gold-6252: 35.75 MiB in 11 ways.
WAY_KIB = 3328


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    #: The default group's schemata (the host's ways).
    root: str
    #: Groups of other tools (and nova-rdt's PMD group): name -> schemata.
    others: dict
    #: Domains started in turn: their <cputune> contents.
    domains: tuple[str, ...]


def cache(cid, ways, kind="both"):
    return (f"<cache id='{cid}' level='3' type='{kind}' "
            f"size='{ways * WAY_KIB}' unit='KiB'/>")


def cachetune(vcpus, *caches):
    return f"<cachetune vcpus='{vcpus}'>{''.join(caches)}</cachetune>"


def memorytune(vcpus, **nodes):
    body = "".join(f"<node id='{n[1:]}' bandwidth='{bw}'/>"
                   for n, bw in nodes.items())
    return f"<memorytune vcpus='{vcpus}'>{body}</memorytune>"


GOLD = [
    # Node 1's 70 tells "copied from the default group" from the kernel's
    # 100 for a new group.
    Case("mb beside a group at MB 100", "L3:0=3;1=3\nMB:0=100;1=70",
         {"nova-rdt-pmd": "L3:0=4;1=4\nMB:0=100;1=100"},
         (cachetune("0-1", cache(0, 1)) + memorytune("0-1", n0=50),)),
    Case("two MB domains over 100% together", "L3:0=3;1=3\nMB:0=100;1=100",
         {},
         (cachetune("0", cache(0, 1)) + memorytune("0", n0=60),
          cachetune("0", cache(0, 1)) + memorytune("0", n0=50, n1=70))),
    Case("a full cache", "L3:0=3;1=3\nMB:0=100;1=100",
         {"other-tool": "L3:0=7fc;1=4"},
         (cachetune("0", cache(0, 1)),)),
    Case("a fragmented cache: best fit, lowest ways first",
         "L3:0=3;1=3\nMB:0=100;1=100",
         {"tool-a": "L3:0=c;1=4", "tool-b": "L3:0=20;1=4",
          "tool-c": "L3:0=600;1=4"},
         # Free on cache 0: way 4 alone, ways 6-8: 2 ways take 6-7, 1 way
         # takes way 4, then 3 ways find no run.
         (cachetune("0", cache(0, 2)), cachetune("0", cache(0, 1)),
          cachetune("0", cache(0, 3)))),
    Case("two cachetunes in one domain", "L3:0=3;1=3\nMB:0=100;1=100", {},
         (cachetune("0", cache(0, 2), cache(1, 1))
          + cachetune("1", cache(0, 3)),)),
    Case("a size that is not whole ways", "L3:0=3;1=3\nMB:0=100;1=100", {},
         ("<cachetune vcpus='0'><cache id='0' level='3' type='both' "
          "size='5000' unit='KiB'/></cachetune>",)),
]

CDP = [
    Case("CDP: code and data ways", "L3CODE:0=3;1=3\nL3DATA:0=3;1=3\n"
         "MB:0=100;1=100", {"other-tool": "L3CODE:0=4;1=4\nL3DATA:0=c;1=4"},
         (cachetune("0-1", cache(0, 2, "code"), cache(0, 3, "data")),
          cachetune("0-1", cache(0, 8, "data")))),
]


@pytest.fixture(scope="module", params=["gold-6252", "gold-6252-cdp"])
def lab(request, libvirt_cache):
    from nova_rdt.lab import libvirtd
    why = libvirtd.kvm_unavailable_reason()
    if why:
        # libvirt takes <cachetune> for kvm domains only.
        pytest.skip(f"no kvm domains here ({why}): libvirt refuses every "
                    f"<cachetune>, there is nothing to compare")
    # Each case then writes its own default group.
    yield from prepared_lab(libvirt_cache, reserved_ways=2,
                            profile=request.param)


def _set_up(lab, case: Case) -> None:
    with open(os.path.join(lab.resctrl_root, "schemata"), "w") as f:
        f.write(case.root + "\n")
    for name, text in case.others.items():
        path = os.path.join(lab.resctrl_root, name)
        os.mkdir(path)
        for line in text.splitlines():
            with open(os.path.join(path, "schemata"), "w") as f:
                f.write(line + "\n")


def _tear_down(lab, case: Case, names: list[str]) -> list[str]:
    """Remove what the case made; returns the groups libvirt left."""
    for name in names:
        lab.libvirt.virsh("destroy", name, check=False)
        lab.libvirt.virsh("undefine", name, check=False)
    for name in case.others:
        path = os.path.join(lab.resctrl_root, name)
        if os.path.isdir(path):
            os.rmdir(path)
    left = [g for g in os.listdir(lab.resctrl_root) if g.startswith("qemu-")]
    for g in left:
        shutil.rmtree(os.path.join(lab.resctrl_root, g), ignore_errors=True)
    return left


def _real_groups(lab, domid: int) -> dict[str, Schemata]:
    return {g: hooklab.schemata(lab, g)
            for g in sorted(os.listdir(lab.resctrl_root))
            if g.startswith(f"qemu-{domid}-")}


def _outcome(lab, name: str, tune: str):
    """(double's plan or refusal, real groups or refusal) of one start."""
    fs = hooklab.fs(lab)
    with fs.locked():
        state = libvirt_model.read_state(fs)
    tunes = libvirt_model.parse_tunes(
        [e for e in _elements(tune)])
    lab.libvirt.define(diskless_domain_xml(
        name, vcpus=2, domain_type="kvm", cputune=tune))
    try:
        lab.libvirt.start_domain(name)
    except VirshError as e:
        real: object = ("refused", e.stderr)
        domid = 0
    else:
        domid = int(lab.libvirt.virsh("domid", name).strip())
        real = _real_groups(lab, domid)
    try:
        allocs = libvirt_model.plan_all(tunes, state, domid or 1, name)
    except libvirt_model.TuneError as e:
        return ("refused", str(e)), real
    return {a.group: a.schemata for a in allocs if a.group}, real


def _elements(tune: str) -> list[str]:
    from lxml import etree
    root = etree.fromstring(f"<cputune>{tune}</cputune>".encode())
    return [etree.tostring(e, encoding="unicode") for e in root]


def _cases(lab):
    return CDP if lab.profile.cdp else GOLD


def test_the_double_allocates_as_the_real_libvirtd(lab):
    compared = 0
    left: list[str] = []
    for case in _cases(lab):
        _set_up(lab, case)
        names = []
        try:
            for i, tune in enumerate(case.domains):
                name = f"conf-{len(names)}-{abs(hash(case.name)) % 10**6}"
                names.append(name)
                want, real = _outcome(lab, name, tune)
                where = f"{case.name}, domain {i}"
                if isinstance(want, tuple) or isinstance(real, tuple):
                    assert isinstance(want, tuple), \
                        (where, "libvirt refused, the double did not", real)
                    assert isinstance(real, tuple), \
                        (where, "the double refused, libvirt did not", want,
                         {g: s.format() for g, s in real.items()})
                    # libvirt's own words, as the double gives them.
                    assert want[1] in real[1], (where, want, real)
                else:
                    assert set(want) == set(real), (where, want, real)
                    for group, sch in want.items():
                        # The same caches (MB may be only the kernel's).
                        assert {r for r in real[group].resources()
                                if r != "MB"} == \
                            {r for r in sch.resources() if r != "MB"}, \
                            (where, group, sch.format(),
                             real[group].format())
                        for res in sch.resources():
                            assert dict(real[group].domains(res)) == \
                                dict(sch.domains(res)), \
                                (where, group, res, sch.format(),
                                 real[group].format())
                compared += 1
        finally:
            left += _tear_down(lab, case, names)
    assert compared == sum(len(c.domains) for c in _cases(lab))
    assert not left, f"libvirt left groups behind: {left}"
