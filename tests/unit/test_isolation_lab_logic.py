# ruff: noqa: E501  (domain XML and ovs-ofctl output, verbatim)
"""The pure parts of the lab's isolation cloud: Nova's domain made
runnable by the real libvirtd, the vhost-user port binding, OVS port
statistics and the per-trial accounting."""

from __future__ import annotations

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from lxml import etree
import pytest

from nova_rdt.lab.cloud import vhostuser
from nova_rdt.lab.isolation import domain as domain_mod

NOVA_XML = """<domain type='kvm'>
  <uuid>d22788cd-8399-4d96-9da3-35edaae3d472</uuid>
  <name>instance-00000001</name>
  <memory>524288</memory>
  <memoryBacking><source type='file'/><access mode='shared'/></memoryBacking>
  <vcpu>2</vcpu>
  <cputune>
    <vcpupin vcpu='0' cpuset='4'/>
    <vcpupin vcpu='1' cpuset='5'/>
    <emulatorpin cpuset='4-5'/>
    <cachetune vcpus='0-1'><cache id='0' level='3' type='both' size='6' unit='MiB'/></cachetune>
  </cputune>
  <numatune>
    <memory mode='strict' nodeset='1'/>
    <memnode cellid='0' mode='strict' nodeset='1'/>
  </numatune>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>/var/lib/nova/instances/x/kernel</kernel>
    <initrd>/var/lib/nova/instances/x/ramdisk</initrd>
    <cmdline>console=ttyS0 nova_rdt.role=forward</cmdline>
  </os>
  <cpu><numa><cell id='0' cpus='0-1' memory='524288'/></numa></cpu>
  <devices>
    <disk type='file' device='disk'><source file='/var/lib/nova/instances/x/disk'/><target dev='vda'/></disk>
    <interface type='vhostuser'><source type='unix' path='/run/vhuA' mode='server'/><model type='virtio'/></interface>
    <interface type='vhostuser'><source type='unix' path='/run/vhuB' mode='server'/><model type='virtio'/></interface>
    <serial type='pty'><log file='/var/lib/nova/instances/x/console.log' append='off'/></serial>
    <console type='pty'><log file='/var/lib/nova/instances/x/console.log' append='off'/></console>
  </devices>
</domain>"""


def _real(**kw):
    args = dict(kernel="/img/vmlinuz", initrd="/img/initrd.gz",
                hostmap=domain_mod.HostMap(cpus=(0,), nodes=(0,)),
                console_log="/lab/console.log")
    args.update(kw)
    return domain_mod.for_real_libvirt(NOVA_XML, **args)


def test_keeps_what_nova_wrote_and_changes_only_the_listed():
    real = _real()
    dom = etree.fromstring(real.xml)
    assert dom.get("type") == "kvm"
    assert (real.name, real.uuid) == ("instance-00000001",
                                      "d22788cd-8399-4d96-9da3-35edaae3d472")
    assert dom.findtext("os/kernel") == "/img/vmlinuz"
    assert dom.findtext("os/initrd") == "/img/initrd.gz"
    assert dom.findtext("os/cmdline") == "console=ttyS0 nova_rdt.role=forward"
    assert dom.find("devices/disk") is None
    assert [e.get("cpuset") for e in dom.iterfind("cputune/vcpupin")] == \
        ["0", "0"]
    assert dom.find("cputune/emulatorpin").get("cpuset") == "0"
    # RDT, memory backing, guest NUMA and the vhost-user NICs stay.
    assert dom.find("cputune/cachetune/cache").get("size") == "6"
    assert dom.find("memoryBacking/access").get("mode") == "shared"
    assert dom.find("cpu/numa/cell").get("cpus") == "0-1"
    assert real.vhostuser_sockets == ("/run/vhuA", "/run/vhuB")
    assert {e.get("nodeset") for e in dom.iterfind("numatune/*")} == {"0"}
    assert {e.get("file") for e in dom.iterfind("devices/*/log")} == \
        {"/lab/console.log"}
    assert any("dropped <disk>" in c for c in real.changes)
    assert any("vcpupin vcpu='1'> cpuset 5 -> 0" in c for c in real.changes)


def test_under_tcg_the_rdt_elements_libvirt_refuses_are_taken_out():
    xml = NOVA_XML.replace("<domain type='kvm'>", "<domain type='qemu'>")
    real = domain_mod.for_real_libvirt(
        xml, "/k", "/i", domain_mod.HostMap(cpus=(0,)), "/l")
    dom = etree.fromstring(real.xml)
    assert dom.get("type") == "qemu"
    assert dom.find("cputune/cachetune") is None
    assert dom.findall("cputune/vcpupin")
    assert len(real.dropped_tune) == 1
    assert "<cache " in real.dropped_tune[0]
    assert any("KVM domains only" in c for c in real.changes)
    # Under KVM nothing of it is dropped.
    assert _real().dropped_tune == ()


def test_a_domain_without_a_kernel_says_what_the_image_lacks():
    xml = NOVA_XML.replace("<kernel>/var/lib/nova/instances/x/kernel"
                           "</kernel>", "")
    with pytest.raises(ValueError, match="kernel_id and ramdisk_id"):
        domain_mod.for_real_libvirt(xml, "/k", "/i",
                                    domain_mod.HostMap(cpus=(0,)), "/l")


def test_hostmap_refuses_nothing_to_map_onto():
    with pytest.raises(ValueError, match="at least one CPU"):
        domain_mod.HostMap(cpus=())
    with pytest.raises(ValueError, match="NUMA node"):
        domain_mod.HostMap(cpus=(0,), nodes=())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 15), min_size=1, max_size=8, unique=True),
       st.lists(st.integers(0, 63), min_size=1, max_size=6, unique=True))
def test_hostmap_maps_every_cpu_onto_the_given_ones(host, nova):
    from nova_rdt.resctrl import cpulist
    hm = domain_mod.HostMap(cpus=tuple(host))
    mapped = cpulist.parse(hm.map_cpus(cpulist.format(nova)))
    assert mapped and mapped <= set(host)
    assert mapped == {host[c % len(host)] for c in nova}


def test_vhostuser_binding_is_what_neutron_ovs_returns():
    port_id = "88dae9fa-0dc6-49e3-8c29-3abc41e99ac9"
    b = vhostuser.binding("/run/ovs", port_id, "br-lab")
    assert b["binding:vif_type"] == "vhostuser"
    d = b["binding:vif_details"]
    assert d == {"vhostuser_socket": "/run/ovs/vhu88dae9fa-0d",
                 "vhostuser_mode": "server", "vhostuser_ovs_plug": True,
                 "datapath_type": "netdev", "bridge_name": "br-lab",
                 "ovs_hybrid_plug": False, "port_filter": False}
    # os-vif's port name: the socket and the OVS port agree.
    assert vhostuser.ovs_port_name(port_id) == "vhu88dae9fa-0d"
    with pytest.raises(ValueError, match="vhostuser_mode"):
        vhostuser.binding("/run/ovs", port_id, "br-lab", mode="both")


def test_vhostuser_binding_survives_novas_binding_in_the_fixture():
    """Through Nova's own Neutron fixture: create, then Nova binds the
    port to a host as it does at boot; vif_type and details stay."""
    pytest.importorskip("nova")
    from nova.tests.fixtures import neutron as nfix

    class _Test:
        def flags(self, **kw):
            pass

        def stub_out(self, *a, **kw):
            pass

    fx = nfix.NeutronFixture(_Test())
    port = vhostuser.create_port(fx, "fwd-eth0", "/run/ovs", "br-lab")
    fx.update_port(port["id"], {"port": {"binding:host_id": "compute1",
                                         "binding:profile": {}}})
    shown = fx.show_port(port["id"])["port"]
    assert shown["binding:host_id"] == "compute1"
    assert shown["binding:vif_type"] == "vhostuser"
    assert shown["binding:vif_details"]["vhostuser_socket"] == \
        "/run/ovs/" + vhostuser.ovs_port_name(port["id"])


DUMP_PORTS = """OFPST_PORT reply (xid=0x4): 4 ports
  port  p0: rx pkts=120, bytes=7680, drop=0, errs=0, frame=?, over=?, crc=?
           tx pkts=118, bytes=7552, drop=0, errs=0, coll=?
  port  "vhu88dae9fa-0d": rx pkts=117, bytes=0, drop=0, errs=0, frame=?, over=?, crc=?
           tx pkts=120, bytes=0, drop=2, errs=?, coll=?
  port  LOCAL: rx pkts=0, bytes=0, drop=0, errs=0, frame=0, over=0, crc=0
           tx pkts=0, bytes=0, drop=0, errs=0, coll=0
"""


def test_ofctl_port_stats():
    from nova_rdt.lab.isolation.labcloud import ofctl_port_stats
    stats = ofctl_port_stats(DUMP_PORTS)
    assert stats["p0"] == {"rx": 120, "tx": 118}
    assert stats["vhu88dae9fa-0d"] == {"rx": 117, "tx": 120}
    assert stats["LOCAL"] == {"rx": 0, "tx": 0}


def test_per_trial_counters_line_up_with_the_trial_log():
    from nova_rdt.lab.isolation.labcloud import _per_trial
    marks = [{"event": "frame", "frame_size": 64, "vm_rx": 10, "vm_tx": 9},
             {"event": "trial", "frame_size": 64, "trial": 1,
              "offered_pps": 1000, "vm_rx": 510, "vm_tx": 505},
             {"event": "trial", "frame_size": 64, "trial": 2,
              "offered_pps": 2000, "vm_rx": 1510, "vm_tx": 1500}]
    frames = [{"frame_size": 64, "throughput": {"trial_log": [
        {"tx": 500, "rx": 496}, {"tx": 1000, "rx": 995}]}}]
    out = _per_trial(marks, frames)
    assert out == [
        {"frame_size": 64, "trial": 1, "offered_pps": 1000, "gen_tx": 500,
         "gen_rx": 496, "vm_rx": 500, "vm_tx": 496},
        {"frame_size": 64, "trial": 2, "offered_pps": 2000, "gen_tx": 1000,
         "gen_rx": 995, "vm_rx": 1000, "vm_tx": 995}]
