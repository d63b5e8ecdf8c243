"""What a running cloud hands its user: ``<out>/cloud/clouds.yaml``,
``serve.json`` (each service's pid, URL and log; the resctrl root, the
image, the Tempest workspace) and a Tempest workspace whose tempest.conf
points at the cloud (the plugin's ``stack test-config`` writes its
``[nova_rdt]`` group, as devstack's would)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import yaml

from nova_rdt.lab.allinone import ini
from nova_rdt.lab.allinone import keystone as keystone_mod

ADMIN_CLOUD = "nova-rdt-admin"
MEMBER_CLOUD = "nova-rdt-member"


def cloud_dir(out_dir: str) -> str:
    return os.path.join(out_dir, "cloud")


def clouds_yaml(cloud, path: str) -> str:
    def entry(auth: dict) -> dict:
        return {"auth": auth, "region_name": keystone_mod.REGION,
                "identity_api_version": 3, "interface": "public"}
    doc = {"clouds": {ADMIN_CLOUD: entry(cloud.keystone.admin_auth()),
                      MEMBER_CLOUD: entry(cloud.keystone.member_auth())}}
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("# The lab's cloud; it lives as long as `nova-rdt lab "
                "--scenario cloud` runs.\n")
        yaml.safe_dump(doc, f, default_flow_style=False, sort_keys=False)
    os.chmod(path, 0o600)
    return path


def exports(path: str, cloud_name: str = ADMIN_CLOUD) -> list[str]:
    return [f"export OS_CLIENT_CONFIG_FILE={path}",
            f"export OS_CLOUD={cloud_name}"]


def tempest_conf(cloud) -> dict:
    """tempest.conf before the plugin's ``stack test-config``."""
    ks = cloud.keystone
    image = cloud.images.get(cloud_image_name(cloud))
    return {
        "DEFAULT": {"log_file": "tempest.log"},
        "auth": {"admin_username": keystone_mod.ADMIN,
                 "admin_password": ks.password,
                 "admin_project_name": keystone_mod.ADMIN,
                 "admin_domain_name": keystone_mod.DOMAIN,
                 "use_dynamic_credentials": True,
                 # No tenant networks: servers boot with --nic none.
                 "create_isolated_networks": False},
        "identity": {"uri_v3": ks.url + "/v3", "auth_version": "v3",
                     "region": keystone_mod.REGION},
        "compute": {"image_ref": image, "image_ref_alt": image,
                    "min_microversion": "2.1",
                    "max_microversion": "latest",
                    "build_timeout": 180,
                    "min_compute_nodes": len(cloud.sides()),
                    "region": keystone_mod.REGION},
        # Moves need a second compute (and, live, a shared instances
        # path, which the two-compute cloud has).
        "compute-feature-enabled": {
            "live_migration": bool(cloud.subnode),
            "cold_migration": bool(cloud.subnode),
            "resize": True, "shelve": True},
        "image": {"region": keystone_mod.REGION},
        "network": {"region": keystone_mod.REGION},
        "placement": {"region": keystone_mod.REGION},
        "service_available": {"nova": True, "glance": True,
                              "neutron": True, "cinder": False,
                              "swift": False, "placement": True},
        "validation": {"run_validation": False},
        "nova_rdt": {"exporter_url": cloud.services.get(
            "nova-rdt-exporter", {}).get("url")},
    }


def cloud_image_name(cloud) -> str:
    from nova_rdt.lab.allinone import cloud as cloud_mod
    return cloud_mod.IMAGE


def clear_workspace(directory: str) -> str:
    """Remove a previous run's workspace at ``directory`` (and its
    registry file, returned): it points at a cloud that is gone, and
    ``tempest init`` refuses a directory that is not empty, so a second
    run in the same report directory would fail."""
    registry = directory + ".workspace.yaml"
    if os.path.isdir(directory) and not os.path.islink(directory):
        shutil.rmtree(directory)
    if os.path.lexists(registry):
        os.unlink(registry)
    return registry


def tempest_workspace(cloud, directory: str) -> str:
    """``tempest init`` (its workspace file in the lab, not ~/.tempest),
    our tempest.conf, then the plugin's ``stack test-config``."""
    bindir = os.path.dirname(sys.executable)
    registry = clear_workspace(directory)
    res = subprocess.run(
        [os.path.join(bindir, "tempest"), "init", "--name",
         "nova-rdt-lab", "--workspace-path", registry, directory],
        capture_output=True, text=True, timeout=120, env=cloud.env())
    if res.returncode != 0:
        raise RuntimeError(f"tempest init failed: "
                           f"{(res.stderr + res.stdout)[-2000:]}")
    conf = os.path.join(directory, "etc", "tempest.conf")
    ini.write(conf, tempest_conf(cloud))
    # The scenario's generator, networks and frame sizes, now that the
    # networks exist.
    cloud.plugin.env.update(cloud.tempest_env())
    cloud.plugin.env["TEMPEST_CONFIG"] = conf
    cloud.plugin.run("test-config")
    return directory


def host_processes(cloud) -> dict[str, dict]:
    """The Host lab's own processes (libvirtd, OVS-DPDK, the namespace's
    holder, the resctrl emulator)."""
    out = {}
    for proc in cloud.lab.sup.procs:
        if proc.name not in cloud.services and proc.running():
            out[proc.name] = {"pid": proc.pid, "url": (
                cloud.lab.libvirt.uri if proc.name == "libvirtd" else None),
                "log": proc.log_path}
    emu = cloud.lab.emulator
    if emu is not None and emu.proc is not None:
        out["resctrl-emulator"] = {"pid": emu.proc.pid,
                                   "url": None, "log": None,
                                   "mountpoint": emu.mountpoint}
    return out


def dataplane_doc(cloud) -> dict:
    """The dataplane networks, their bridges and the generator's ports
    (for a user's own ``nova-rdt rfc2544 run --config``)."""
    from nova_rdt.lab.allinone import dataplane
    dp = cloud.dataplane
    return {
        "networks": {dataplane.NETWORKS[p]: {
            "id": cloud.networks.get(p), "physnet": p,
            "bridge": dataplane.BRIDGES[p],
            "generator_port": dp.ports.get(p, (None, None))[0],
            "generator_interface": dp.ports.get(p, (None, None))[1]}
            for p in dataplane.PHYSNETS},
        "traffic_netns": dp.netns if cloud.lab.traffic else None,
        "agent_config": cloud.agent.conf_path,
        "vhostuser_socket_dir": cloud.lab.ovs.run_dir,
        "generator_config": cloud.tempest_env().get(
            "NOVA_RDT_TEMPEST_GENERATOR_CONFIG"),
    }


def serve_json(cloud, path: str, workspace: str | None) -> str:
    doc = {
        "services": cloud.services,
        "host_lab": host_processes(cloud),
        "resctrl_root": cloud.lab.resctrl_root,
        "resctrl_root_in_namespace": "/sys/fs/resctrl",
        "image": cloud_image_name(cloud),
        "images": cloud.images,
        "tempest_workspace": workspace,
        "clouds_yaml": os.path.join(os.path.dirname(path), "clouds.yaml"),
        "clouds": [ADMIN_CLOUD, MEMBER_CLOUD],
        "hypervisor": cloud.hypervisor,
        # Each compute: where its resctrl, libvirtd, nova-rdt state and
        # exporter are (one with --computes 1).
        "computes": [{"host": side.host, "libvirt_uri": side.libvirt_uri,
                      "resctrl_root": side.resctrl_root,
                      "state_path": side.state_path,
                      "exporter": cloud.exporters.get(side.host)}
                     for side in cloud.sides()],
        "dataplane": dataplane_doc(cloud),
        "virt_type": cloud.machine.virt_type,
        "virt_type_reason": cloud.machine.reason,
        "forced_by_this_machine": cloud.machine.forced,
        "guest_image": cloud.guest.kind if cloud.guest else None,
        "guest_image_reason": cloud.guest.reason if cloud.guest else None,
        "nova_conf": cloud.nova.conf,
        "nova_cpu_conf": cloud.nova.cpu_conf,
        "lab_dir": cloud.base,
        "namespace_holder_pid": (cloud.lab.ns.holder.pid
                                 if cloud.lab.ns.holder else None),
        "libvirt_uri": cloud.lab.libvirt.uri,
        "timings": cloud.timings,
    }
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
    return path
