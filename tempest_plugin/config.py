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
    cfg.StrOpt("generator", default="none",
               choices=["none", "software", "ixnetwork"],
               help="Traffic generator for the RFC 2544 scenario; 'none' "
                    "skips it."),
    cfg.StrOpt("generator_config",
               help="YAML for nova-rdt rfc2544 (generator section, frame "
                    "sizes, durations); see nova_rdt.rfc2544.config.  The "
                    "options below override its search settings."),
    cfg.ListOpt("frame_sizes", default=["64", "512", "1518"],
                help="Frame sizes (bytes) of the scenario's RFC 2544 runs."),
    cfg.FloatOpt("loss_tolerance", default=0.001,
                 help="Acceptable loss ratio of the throughput search "
                      "(0.001 = 0.1%, as the ONP app note; 0 = RFC 2544)."),
    cfg.FloatOpt("trial_duration", default=10.0,
                 help="Seconds per full-length throughput trial."),
    cfg.FloatOpt("latency_duration", default=10.0,
                 help="Seconds of each latency measurement."),
    cfg.FloatOpt("max_latency_ratio", default=1.25,
                 help="Largest allowed ratio of the forwarding VM's average "
                      "latency with the neighbour busy to the idle "
                      "baseline, per frame size."),
    cfg.FloatOpt("max_p99_ratio", default=2.0,
                 help="The same for the 99th percentile."),
    cfg.StrOpt("forwarding_image_ref",
               help="Image of the forwarding VM (testpmd started by its "
                    "user data); defaults to [compute] image_ref."),
    cfg.StrOpt("noisy_image_ref",
               help="Image of the noisy neighbour (memtester or stress-ng "
                    "in its user data); defaults to [compute] image_ref."),
    cfg.IntOpt("forwarding_l3_ways", default=4,
               help="rdt:l3_cache_ways of the forwarding flavor (it also "
                    "sets rdt:pmd_share=true)."),
    cfg.StrOpt("noisy_class", default="low_priority",
               help="rdt:class of the noisy neighbour's flavor; must be "
                    "defined in [rdt] classes on the computes."),
    cfg.StrOpt("noisy_user_data",
               default="#!/bin/sh\n(command -v stress-ng >/dev/null && "
                       "stress-ng --stream 0 --timeout 0) || "
                       "memtester 512M 0\n",
               help="User data that keeps the neighbour busy once it "
                    "runs; the scenario pauses it for the idle baseline."),
    cfg.StrOpt("forwarding_user_data",
               help="User data that starts the forwarder (testpmd) in the "
                    "forwarding VM."),
    cfg.StrOpt("artifacts_dir", default="/tmp/nova-rdt-tempest",
               help="Where reports and plots of the scenario are saved."),
]
