"""Stages 2 and 3: Nova's control plane in-process (the lab's Nova
cloud) with an RDT compute on the Host lab's resctrl and a plain one;
then the flavors and the boots (:mod:`.flavors`, :mod:`.boots`).

Importing this module imports Nova's test framework: eventlet must be
patched first (:func:`nova_rdt.lab.demo.cli.main` does it).
"""

from __future__ import annotations

import dataclasses
import os

from nova_rdt.emulator import profiles
from nova_rdt.lab.cloud import lab_cloud
from nova_rdt.lab.demo.stages import boots
from nova_rdt.lab.demo.stages import flavors as flavors_stage
from nova_rdt.lab.nova_paste import nova_api_paste_ini

#: Fillers booted at most, looking for "no valid host".
FILLERS = 12
FILLERS_SHORT = 5


@dataclasses.dataclass
class Outcome:
    """What happened in Nova and on the lab's libvirtd."""

    servers: list[dict] = dataclasses.field(default_factory=list)
    bad_spec: str | None = None
    no_valid_host: str | None = None
    filter_reasons: list[str] = dataclasses.field(default_factory=list)
    realized: list[str] = dataclasses.field(default_factory=list)
    refused: list[tuple[str, str]] = dataclasses.field(default_factory=list)


def cloud_config(lab, scenario, out_dir: str) -> lab_cloud.CloudConfig:
    settings = lab.hook_settings(host_view=True)
    return lab_cloud.CloudConfig(
        profile=scenario.profile,
        numa_nodes=profiles.get(scenario.profile).domains,
        resctrl_root=lab.resctrl_root,
        rdt_flags=dict(
            reserved_host_ways=scenario.reserved_host_ways,
            pmd_shared_ways=scenario.pmd_shared_ways,
            pmd_cos=scenario.pmd_cos,
            classes=list(scenario.classes),
            state_path=settings.state_path,
            ovsdb_connection=settings.ovsdb_connection,
            ovs_vswitchd_pidfile=settings.ovs_vswitchd_pidfile,
            ovs_vswitchd_target=settings.ovs_vswitchd_target,
            libvirt_qemu_run_dir=settings.libvirt_qemu_run_dir),
        no_resctrl_dir=os.path.join(out_dir, "no-resctrl"),
        api_paste_config=nova_api_paste_ini())


def run(lab, scenario, say, out_dir: str, short: bool) -> Outcome:
    outcome = Outcome()
    state_path = lab.hook_settings(host_view=True).state_path

    def in_nova(cloud: lab_cloud.LabCloud) -> Outcome:
        say.stage(2, "Control plane: Nova API, scheduler, conductor, "
                     "compute")
        cloud.start_lab_computes()
        say("nova-api, nova-conductor, nova-scheduler (RDTFilter) and "
            f"placement up; computes: {lab_cloud.RDT_COMPUTE} "
            f"(LibvirtRDTDriver on {lab.resctrl_root}), "
            f"{lab_cloud.PLAIN_COMPUTE} (no resctrl)")

        say.stage(3, "Boots: flavors through the API")
        ids = flavors_stage.create(cloud, scenario, say)
        key, value = scenario.bad_spec
        outcome.bad_spec = flavors_stage.try_bad_spec(
            cloud, ids[scenario.flavors[0].name], key, value)
        say(f"flavor set --property {key}={value}: {outcome.bad_spec}")
        booter = boots.Booter(cloud, lab, ids, state_path, out_dir, outcome,
                              say)
        boots.boot_scenario(booter, scenario, say)
        boots.boot_until_full(booter, scenario, outcome, say,
                              FILLERS_SHORT if short else FILLERS)
        return outcome

    return lab_cloud.run_in_cloud(cloud_config(lab, scenario, out_dir),
                                  in_nova)
