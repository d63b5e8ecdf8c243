"""``nova-rdt lab --scenario isolation``: the Host lab, the lab's Nova
with vhost-user ports on its OVS-DPDK, and the isolation procedure
(:func:`nova_rdt.isolation.procedure.run`) on them.

Writes ``<out>/isolation/summary.json``, the tables as CSV, the
per-trial OVS counters and (with matplotlib) the figures, and
``<out>/summary.json`` for ``nova-rdt lab``.  Everything the run started
is stopped on success, failure, Ctrl-C and SIGTERM (by its
:class:`~nova_rdt.lab.run.LabRun`).

Importing this module imports Nova's test framework: eventlet must be
patched first (:func:`nova_rdt.lab.demo.cli.main` does it).
"""

from __future__ import annotations

import dataclasses
import os

from nova_rdt.emulator import profiles
from nova_rdt.isolation import procedure
from nova_rdt.isolation import tables as iso_tables
from nova_rdt.lab import scenarios as scen_mod
from nova_rdt.lab.cloud import lab_cloud
from nova_rdt.lab.demo import console
from nova_rdt.lab.guest import boot as guest_boot
from nova_rdt.lab.guest import image as guest_image
from nova_rdt.lab.host import Lab
from nova_rdt.lab.isolation import domain as domain_mod
from nova_rdt.lab.isolation import labcloud
from nova_rdt.lab.isolation import report
from nova_rdt.lab.nova_paste import nova_api_paste_ini
from nova_rdt.lab.run import LabRun

#: The seed layout whose host and hook settings the experiment uses
#: (ONP: the forwarding VM shares the PMDs' COS).
BASE_SCENARIO = "onp"
#: The guest's forwarder (nova_rdt.forwarder=): auto runs testpmd in io
#: mode, the app note's VM0, and falls back to the kernel bridge saying
#: why.  Under TCG the guest boots with pci=nomsi (see guest_images):
#: with MSI-X, QEMU 7.2 segfaulted as the guest's virtio PMD started
#: the rings of an OVS-DPDK vhost-user NIC; with legacy interrupts
#: testpmd forwards through them.  $NOVA_RDT_ISOLATION_FORWARDER picks
#: testpmd (no fallback) or kernel.
FORWARDER = os.environ.get("NOVA_RDT_ISOLATION_FORWARDER", "auto")
#: Nova's view of the RDT host: 4 cores per L3 domain, all dedicated.
CORES_PER_NODE = 4
#: file-backed guest memory Nova may hand out (MiB): shared memory for
#: vhost-user without hugepages.
FILE_BACKED_MEMORY_MB = 8192
#: The CPU model Nova asks for under TCG (-cpu host needs KVM): the
#: oldest with SSE4.2, which DPDK's x86 build (testpmd in the guest)
#: needs; qemu64 would leave the guest the kernel bridge only.
TCG_CPU_MODEL = "Nehalem"



def settings_for(short: bool) -> procedure.Settings:
    """The procedure's settings; --short measures one frame size."""
    if short:
        return procedure.Settings(frame_sizes=(64,), forwarding_ram_mb=512,
                                  noisy_ram_mb=256, noisy_memory_mb=128)
    return procedure.Settings()


def nova_flags(lab: Lab, accel: guest_boot.AccelDecision,
               numa_nodes: int) -> dict:
    """The Nova options of the isolation cloud (group -> options)."""
    libvirt = {"virt_type": lab.libvirt.linux_domain_type,
               "file_backed_memory": FILE_BACKED_MEMORY_MB}
    if lab.libvirt.tcg_for_kvm:
        # No <cpu>: the lab's QEMU gives TCG guests -cpu max (SSE4.2 for
        # testpmd); a named model would be checked against this host's
        # CPU, which KVM domains are.
        libvirt.update(cpu_mode="none")
    elif accel.accel == "tcg":
        libvirt.update(cpu_mode="custom", cpu_models=[TCG_CPU_MODEL])
    return {
        "DEFAULT": {"ram_allocation_ratio": 1.0,
                    "reserved_host_memory_mb": 0},
        "compute": {"cpu_dedicated_set":
                    f"0-{numa_nodes * CORES_PER_NODE - 1}",
                    "cpu_shared_set": None},
        "libvirt": libvirt,
        "vnc": {"enabled": False},
        "os_vif_ovs": {"ovsdb_connection": f"unix:{lab.ovs.db_sock}"},
    }


def cloud_config(lab: Lab, scenario, accel, out_dir: str
                 ) -> lab_cloud.CloudConfig:
    settings = lab.hook_settings(host_view=True)
    nodes = profiles.get(scenario.profile).domains
    return lab_cloud.CloudConfig(
        profile=scenario.profile, numa_nodes=nodes,
        resctrl_root=lab.resctrl_root,
        rdt_flags=dict(
            reserved_host_ways=scenario.reserved_host_ways,
            pmd_shared_ways=scenario.pmd_shared_ways,
            pmd_cos=scenario.pmd_cos, classes=list(scenario.classes),
            state_path=settings.state_path,
            ovsdb_connection=settings.ovsdb_connection,
            ovs_vswitchd_pidfile=settings.ovs_vswitchd_pidfile,
            ovs_vswitchd_target=settings.ovs_vswitchd_target,
            libvirt_qemu_run_dir=settings.libvirt_qemu_run_dir),
        no_resctrl_dir=os.path.join(out_dir, "no-resctrl"),
        api_paste_config=nova_api_paste_ini(),
        nova_flags=nova_flags(lab, accel, nodes),
        # One compute: co-location is then the scheduler's only choice,
        # and the procedure still checks it.
        plain_compute=False, real_os_vif=True)


def guest_images(nova, img, settings: procedure.Settings,
                 accel: guest_boot.AccelDecision) -> dict[str, str]:
    """Glance images as a real cloud would hold the guest: a kernel, a
    ramdisk, and one machine image per role whose kernel_id, ramdisk_id
    and os_command_line Nova turns into the domain's direct boot."""
    glance = nova.glance
    kernel = glance.create(None, {"name": "nova-rdt-guest-kernel",
                                  "disk_format": "aki",
                                  "container_format": "aki",
                                  "status": "active", "visibility": "public",
                                  "properties": {}})["id"]
    ramdisk = glance.create(None, {"name": "nova-rdt-guest-initrd",
                                   "disk_format": "ari",
                                   "container_format": "ari",
                                   "status": "active",
                                   "visibility": "public",
                                   "properties": {}})["id"]
    # Under TCG, QEMU 7.2 dereferences KVM's irqfd table (absent without
    # KVM) when a guest moves a vhost-user queue's MSI-X vector, and
    # segfaults: the guest then uses legacy interrupts.
    tcg = " pci=nomsi" if accel.accel == "tcg" else ""
    extra = {"forward": f"nova_rdt.forwarder={FORWARDER}{tcg}",
             "noisy": f"nova_rdt.stress_mib={settings.noisy_memory_mb}"}
    out = {}
    for role in ("forward", "noisy"):
        out[role] = glance.create(None, {
            "name": f"nova-rdt-guest-{role}", "disk_format": "ami",
            "container_format": "ami", "status": "active",
            "visibility": "public", "min_ram": 0, "min_disk": 0,
            "size": os.path.getsize(img.initrd),
            "properties": {"kernel_id": kernel, "ramdisk_id": ramdisk,
                           "os_command_line": guest_boot.cmdline(
                               role, extra[role]),
                           "architecture": "x86_64"}})["id"]
    return out


def host_map(lab: Lab) -> domain_mod.HostMap:
    """Guests go on this machine's CPUs that run no PMD."""
    online = sorted(os.sched_getaffinity(0))
    mask = lab.ovs.pmd_cpu_mask if lab.ovs else 0
    free = tuple(c for c in online if not mask >> c & 1) or tuple(online)
    return domain_mod.HostMap(cpus=free, nodes=(0,))


def run(scenario_name: str = "isolation", profile: str | None = None,
        out_dir: str = "nova-rdt-lab-report", short: bool = False,
        resctrl: str = "emulated", say: console.Console | None = None,
        libvirt_cache_dir: str | None = None, kernel: str | None = None,
        logs: console.LogFile | None = None) -> dict:
    """The experiment; returns the summary (also in ``summary.json``)."""
    scenario = scen_mod.SCENARIOS[BASE_SCENARIO]
    if profile:
        scenario = dataclasses.replace(scenario, profile=profile)
    iso_dir = os.path.join(out_dir, "isolation")
    os.makedirs(iso_dir, exist_ok=True)
    with LabRun(scenario_name, out_dir, say, logs) as run:
        say, summary = run.say, run.summary
        run.say_summary = _say_summary
        run.summary_paths.insert(0, os.path.join(iso_dir, "summary.json"))
        lab = run.lab = Lab(
            profile=scenario.profile, resctrl=resctrl, kernel=kernel,
            hook={"pmd_cos": scenario.pmd_cos,
                  "reserved_host_ways": scenario.reserved_host_ways,
                  "pmd_shared_ways": scenario.pmd_shared_ways,
                  "classes": list(scenario.classes)},
            failure_log_dir=os.path.join(out_dir, "failure-logs"),
            libvirt_cache_dir=libvirt_cache_dir, log=say)
        ovs_trials: list = []
        say(f"nova-rdt lab: isolation, a forwarding VM beside a noisy "
            f"neighbour{' (short)' if short else ''}")
        run.stage("Host")
        img = guest_image.load()
        lab.start(traffic_ports=2, linux_image=img)
        kind = ("EMULATED " + scenario.profile if lab.emulated
                else "REAL")
        say(f"resctrl: {kind}"
            f"; OVS-DPDK PMD cores "
            f"{sorted(t.core for t in lab.ovs.pmd_threads())}")
        accel = lab.libvirt.linux_accel(img)
        say(f"guests: {accel.accel.upper()} (domain type "
            f"'{lab.libvirt.linux_domain_type}'): {accel.reason}")
        hostmap = host_map(lab)
        settings = settings_for(short)

        def in_nova(nova: lab_cloud.LabCloud) -> dict:
            run.stage("Nova: API, scheduler (RDTFilter), conductor, "
                      "compute; Neutron ports bound as vhost-user")
            nova.start_lab_computes()
            images = guest_images(nova, img, settings, accel)
            say(f"compute {lab_cloud.RDT_COMPUTE}: LibvirtRDTDriver, "
                f"virt_type={lab.libvirt.linux_domain_type}, file-backed "
                f"shared "
                f"memory; os-vif plugs into the lab's ovsdb")
            cloud = labcloud.LabIsolationCloud(
                nova, lab, img, accel, images, iso_dir, say, hostmap)
            run.stage("The four conditions (RFC 2544 through the "
                      "forwarding VM)")
            try:
                return procedure.run(cloud, settings, short,
                                     progress=lambda m: say("  " + m))
            finally:
                ovs_trials.extend(cloud.trials)
                cloud.delete_all()

        try:
            result = lab_cloud.run_in_cloud(
                cloud_config(lab, scenario, accel, out_dir), in_nova)
        finally:
            run.logs.claim()
        run.stage("Tables")
        summary.update(result)
        summary["ovs_trials"] = ovs_trials
        summary["csv"] = iso_tables.write_csv(result["tables"], iso_dir)
        summary["figures"] = _figures(summary, iso_dir, say)
        say(iso_tables.render_text(result["tables"]))
        facts = result.get("facts", {})
        made = facts.get("libvirt_groups") or {}
        if made:
            missing = sorted(srv for srv, v in made.items()
                             if not v.get("vcpus_in_tasks"))
            summary.setdefault("notes", []).append(
                "Every resctrl group was made by libvirt from Nova's "
                "<cachetune>/<memorytune> ("
                + "; ".join(f"{srv}: {', '.join(v['groups'])}"
                            for srv, v in sorted(made.items()))
                + ("), with the domain's vCPU threads in its tasks."
                   if not missing else
                   f"); the vCPU threads of {', '.join(missing)} were NOT "
                   f"all in their group's tasks."))
        for forced in facts.get("machine_forces") or []:
            summary.setdefault("notes", []).append(
                "This machine forces: " + forced)
        if facts.get("rdt_not_applied"):
            summary.setdefault("notes", []).append(
                "libvirt refused the RDT elements of "
                + ", ".join(facts["rdt_not_applied"])
                + ": it takes them for KVM domains only, and this machine "
                  "has no KVM.")
        for note in summary.get("notes", []):
            say("NOTE: " + note)
        # The report reads the final summary (after the clean-up).
        run.finishers.append(lambda s: s.__setitem__(
            "report", _report(out_dir, s, say)))
    return run.summary


def _figures(summary: dict, out_dir: str, say) -> list[str]:
    """Figures 3-2 and 3-3 through the procedure's figures module, when
    it and matplotlib are there; why not goes into the result."""
    try:
        from nova_rdt.isolation import figures
        paths = list(figures.write(summary, out_dir) or [])
        if not paths:
            summary["figures_skipped"] = "matplotlib is not installed"
    except Exception as e:  # optional output: say why and go on
        paths = []
        summary["figures_skipped"] = str(e)
    if not paths:
        say(f"figures skipped: {summary['figures_skipped']}")
    return paths


def _report(out_dir: str, summary: dict, say) -> str | None:
    """The HTML report; a failure to write it is said, never fatal."""
    try:
        return report.render(out_dir, summary)
    except Exception as e:  # the summary and CSV are the record
        say(f"HTML report not written: {e}")
        return None


def _say_summary(say, summary: dict) -> None:
    verdicts = summary.get("verdicts") or []
    failed = [v for v in verdicts if v.get("binding") and v["ok"] is False]
    say(f"{'OK' if summary.get('ok') else 'FAILED'}: accel "
        f"{summary.get('accel', '?')}, forwarder "
        f"{summary.get('forwarder', '?')}, rdt {summary.get('rdt', '?')}; "
        f"{report.held(verdicts)}/{len(verdicts)} checks hold "
        f"in {summary.get('seconds', '?')} s")
    for v in failed:
        say(f"  FAILED {v['check']}: {v['detail']}")
    if summary.get("report"):
        say(f"report:  {summary['report']}")
    path = os.path.join(summary["out_dir"], "isolation", "summary.json")
    say(f"summary: {path}")
    say(f"logs:    {summary['log_file']}")
