"""The ``[nova_rdt]`` group of tempest.conf."""

from oslo_config import cfg

rdt_group = cfg.OptGroup(
    name="nova_rdt", title="nova-rdt (Intel RDT isolation) tests")

RdtGroup = [
    cfg.BoolOpt("api_validators", default=True,
                help="nova-rdt's extra-spec validators are installed in "
                     "nova-api (rdt: keys are checked, bad ones get 400)."),
    cfg.BoolOpt("rdt_compute", default=False,
                help="At least one compute runs LibvirtRDTDriver on a host "
                     "with RDT (resctrl mounted): the scenario needs it."),
    cfg.StrOpt("exporter_url",
               help="The nova-rdt exporter of the RDT compute (such as "
                    "http://compute1:9787): the isolation tests read "
                    "/api/layout and /metrics there, as whitebox checks "
                    "with no SSH.  Unset: they skip."),
    cfg.DictOpt("exporter_urls", default={},
                help="The nova-rdt exporter of each compute, as "
                     "HOST:URL pairs separated by commas (such as "
                     "compute1:http://192.0.2.11:9787,"
                     "compute2:http://192.0.2.12:9787); HOST is Nova's "
                     "name of the compute (its service's host, the "
                     "servers' OS-EXT-SRV-ATTR:host).  A pair splits at "
                     "its first colon, so the URL keeps its own.  The "
                     "migration tests read both ends of every move "
                     "there; they skip when an up compute has none."),
    cfg.StrOpt("generator", default="none",
               choices=["none", "software", "ixnetwork"],
               help="Traffic generator for the RFC 2544 scenario; 'none' "
                    "skips it."),
    cfg.StrOpt("generator_config",
               help="YAML for nova-rdt rfc2544 (generator section, frame "
                    "sizes, durations); see nova_rdt.rfc2544.config.  The "
                    "options below override its search settings."),
    cfg.ListOpt("dataplane_networks", default=[],
                help="The two networks (UUIDs, in port order) of the "
                     "forwarding VM's dataplane NICs, the ones wired to "
                     "the generator's ports (vhost-user on OVS-DPDK in the "
                     "ONP topology).  The scenario skips without them."),
    cfg.StrOpt("management_network",
               help="Network (UUID) of both VMs' first NIC, for cloud-init "
                    "and the console; unset: the noisy VM gets Nova's "
                    "default and the forwarding VM only its two "
                    "dataplane NICs."),
    cfg.ListOpt("frame_sizes", default=["64", "256", "1024", "1512"],
                help="Frame sizes (bytes) of the scenario's RFC 2544 runs "
                     "(the ONP app note's by default)."),
    cfg.FloatOpt("loss_tolerance", default=0.001,
                 help="Acceptable loss ratio of the throughput search "
                      "(0.001 = 0.1%, as the ONP app note; 0 = RFC 2544)."),
    cfg.FloatOpt("trial_duration", default=10.0,
                 help="Seconds per full-length throughput trial."),
    cfg.MultiStrOpt("search_goals", default=[],
                    help="RFC 9971 search goals of the throughput search, "
                         "one per line, served from shared trials, as "
                         "KEY=VALUE pairs: loss_ratio, exceed_ratio, "
                         "final_trial_duration, duration_sum, name (e.g. "
                         "'loss_ratio=0,duration_sum=120' and "
                         "'loss_ratio=0.005,name=PDR').  Empty: one goal "
                         "at loss_tolerance and trial_duration."),
    cfg.FloatOpt("initial_trial_duration", default=1.0, min=0,
                 help="Seconds of each exploratory trial of the search "
                      "(they only aim; every bound rests on full-length "
                      "trials); 0: none."),
    cfg.FloatOpt("latency_duration", default=10.0,
                 help="Seconds of each latency measurement."),
    cfg.FloatOpt("max_latency_ratio", default=1.25,
                 help="Largest allowed ratio of the forwarding VM's average "
                      "latency with the neighbour busy to the idle "
                      "reference, per frame size, on the nova-rdt flavors."),
    cfg.FloatOpt("max_p99_ratio", default=2.0,
                 help="The same for the 99th percentile."),
    cfg.StrOpt("forwarding_image_ref",
               help="Image of the forwarding VM (cloud-init; testpmd or "
                    "the kernel forwards, see forwarding_user_data); "
                    "defaults to [compute] image_ref."),
    cfg.StrOpt("noisy_image_ref",
               help="Image of the noisy neighbour (cloud-init with "
                    "memtester or stress-ng); defaults to [compute] "
                    "image_ref."),
    cfg.IntOpt("forwarding_vcpus", default=2, min=1,
               help="vCPUs of the forwarding VM's flavors."),
    cfg.IntOpt("forwarding_ram_mb", default=1024, min=1,
               help="RAM (MiB) of the forwarding VM's flavors."),
    cfg.IntOpt("noisy_vcpus", default=2, min=1,
               help="vCPUs of the noisy neighbour's flavors."),
    cfg.IntOpt("noisy_ram_mb", default=1024, min=1,
               help="RAM (MiB) of the noisy neighbour's flavors."),
    cfg.IntOpt("disk_gb", default=10, min=0,
               help="Root disk (GB) of all four flavors; enough for the "
                    "cloud-init images."),
    cfg.StrOpt("mem_page_size", default="large",
               help="hw:mem_page_size of all four flavors (vhost-user "
                    "needs shared hugepage memory); empty: not set."),
    cfg.IntOpt("forwarding_l3_ways", default=4, min=1,
               help="rdt:l3_cache_ways of the forwarding VM's nova-rdt "
                    "flavor (it also sets rdt:pmd_share=true)."),
    cfg.IntOpt("noisy_l3_ways", default=2, min=1,
               help="rdt:l3_cache_ways of the neighbour's nova-rdt flavor "
                    "(disjoint from the forwarding VM's), unless "
                    "noisy_class is set."),
    cfg.StrOpt("noisy_class",
               help="rdt:class of the neighbour's nova-rdt flavor instead "
                    "of its own ways; must be defined in [rdt] classes on "
                    "the computes."),
    cfg.StrOpt("noisy_load", default="memtester",
               choices=["memtester", "stress-ng"],
               help="What keeps the neighbour busy (the app note's VM1 "
                    "runs memtester; stress-ng runs its cache stressors)."),
    cfg.IntOpt("noisy_memory_mb", default=256, min=1,
               help="Memory (MiB) memtester or stress-ng works on."),
    cfg.StrOpt("noisy_user_data",
               help="User data (plain text; the scenario base64-encodes "
                    "it) replacing the neighbour's own script, which runs "
                    "noisy_load until paused."),
    cfg.StrOpt("forwarding_user_data",
               help="User data (plain text; the scenario base64-encodes "
                    "it) replacing the forwarding VM's own script, which "
                    "runs testpmd in io mode where DPDK is in the image "
                    "and forwards in the kernel otherwise."),
    cfg.FloatOpt("settle_seconds", default=10.0, min=0,
                 help="Seconds the unpaused neighbour runs before the "
                      "busy measurement (it fills the cache first)."),
    cfg.IntOpt("workload_timeout", default=300, min=0,
               help="Seconds to wait, after ACTIVE, for a VM's console "
                    "to say its workload started (which forwarder, which "
                    "load); after one silent console the scenario stops "
                    "waiting for the others."),
    cfg.StrOpt("accel", default="", choices=["", "kvm", "tcg"],
               help="The computes' accelerator as reported; empty: read "
                    "from the guest console ('Hypervisor detected: KVM')."),
    cfg.StrOpt("artifacts_dir", default="/tmp/nova-rdt-tempest",
               help="Where summary.json, the tables, the figures and the "
                    "RFC 2544 reports of the scenario are saved."),
]

# The cloud the scenario runs on: how its VMs are placed and whether its
# RDT is the hardware's.
RdtGroup += [
    cfg.StrOpt("cpu_policy", default="dedicated",
               choices=["", "dedicated", "shared"],
               help="hw:cpu_policy of all four flavors (the ONP app note "
                    "pins both VMs); empty: not set, for computes with no "
                    "[compute] cpu_dedicated_set (such as nova-rdt's lab "
                    "cloud on two CPUs)."),
    cfg.StrOpt("rdt", default="real", choices=["real", "emulated"],
               help="Whether the RDT computes' resctrl is the hardware's "
                    "or nova-rdt's emulator (the lab cloud): on an "
                    "emulated one no hardware partitions the cache, so the "
                    "latency ratio limits are reported, not enforced."),
]
