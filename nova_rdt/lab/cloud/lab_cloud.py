"""The lab's Nova cloud: Nova's API, conductor, scheduler (with
RDTFilter), placement and two computes in-process, one of them an RDT
host on the Host lab's resctrl.

Nova's harness is a unittest TestCase; :func:`run_in_cloud` runs a
function inside one (after its set-up, before its clean-ups) and returns
what the function returns, so the stages that talk to Nova stay plain
functions of the cloud.
"""

from __future__ import annotations

from collections.abc import Callable
import dataclasses
import logging
import os
from typing import Any
import unittest

import fixtures
from nova.virt.libvirt import vif as nova_vif

from nova_rdt import exception
from nova_rdt.lab.cloud.testbase import RdtServersTestBase

LOG = logging.getLogger(__name__)

# Nova's own VIF plugging through os-vif, kept before any test fixture
# replaces it with a no-op (nova.tests.fixtures.libvirt.LibvirtFixture).
_OS_VIF_METHODS = {name: getattr(nova_vif.LibvirtGenericVIFDriver, name)
                   for name in ("_plug_os_vif", "_unplug_os_vif")}

RDT_COMPUTE = "rdt-compute"
PLAIN_COMPUTE = "plain-compute"


@dataclasses.dataclass(frozen=True)
class CloudConfig:
    """What the cloud runs on."""

    #: Emulator profile of the RDT host (its L3 domains = NUMA nodes).
    profile: str
    #: NUMA nodes of the RDT host: one per L3 cache domain of ``profile``.
    numa_nodes: int
    #: The Host lab's resctrl, where its real libvirtd allocates.
    resctrl_root: str
    #: ``[rdt]`` options of the RDT compute (the hook's settings).
    rdt_flags: dict[str, Any]
    #: A directory with no resctrl in it, for the plain compute.
    no_resctrl_dir: str
    #: ``[wsgi] api_paste_config`` (None: Nova's default).
    api_paste_config: str | None = None
    #: Nova options set before the computes start: group -> {name: value}
    #: ("DEFAULT" for the default group).
    nova_flags: dict[str, dict[str, Any]] = dataclasses.field(
        default_factory=dict)
    #: Start the plain compute beside the RDT one.
    plain_compute: bool = True
    #: Let Nova plug VIFs through os-vif for real (its ovs plugin then
    #: writes ports into the ovsdb that ``[os_vif_ovs]
    #: ovsdb_connection`` names) instead of the test framework's no-op.
    real_os_vif: bool = False


class LabCloud(RdtServersTestBase):
    """RdtServersTestBase running nova-rdt's driver and filter."""

    COMPUTE_DRIVER = "rdt.LibvirtRDTDriver"
    ADDITIONAL_FILTERS = ["NUMATopologyFilter", "RDTFilter"]

    def __init__(self, config: CloudConfig,
                 body: Callable[[LabCloud], Any]):
        super().__init__("runTest")
        # Underscored: nova.test.TestCase deletes public attributes in a
        # clean-up, and the result is read after it.
        self._config = config
        self._body = body
        self._value = None
        self.API_PASTE_CONFIG = config.api_paste_config
        self.RDT_HOST_INFO = dict(cpu_nodes=config.numa_nodes,
                                  cpu_sockets=1, cpu_cores=4, cpu_threads=1)

    def _setup_scheduler_service(self):
        self.flags(available_filters=[
            "nova.scheduler.filters.all_filters",
            "nova_rdt.scheduler.filter.RDTFilter"],
            group="filter_scheduler")
        return super()._setup_scheduler_service()

    def setUp(self):
        super().setUp()
        if self._config.real_os_vif:
            for name, method in _OS_VIF_METHODS.items():
                self.useFixture(fixtures.MonkeyPatch(
                    f"nova.virt.libvirt.vif.LibvirtGenericVIFDriver.{name}",
                    method))

    def start_lab_computes(self) -> None:
        """rdt-compute on the lab's resctrl, plain-compute on none."""
        cfg = self._config
        for group, values in cfg.nova_flags.items():
            self.flags(group=None if group == "DEFAULT" else group,
                       **values)
        if cfg.real_os_vif:
            # os-vif's plugins read their options when loaded: load them
            # again now that [os_vif_ovs] points at the lab's ovsdb.
            import os_vif
            os_vif.initialize(reset=True)
        self.flags(group="rdt", **cfg.rdt_flags)
        self.start_rdt_compute(RDT_COMPUTE, profile=cfg.profile,
                               resctrl_root=cfg.resctrl_root,
                               state_path=cfg.rdt_flags.get("state_path"))
        if cfg.plain_compute:
            self.flags(resctrl_root=cfg.no_resctrl_dir,
                       require_resctrl=False, group="rdt")
            self.start_compute(PLAIN_COMPUTE)

    def runTest(self):
        self._value = self._body(self)


class CloudError(exception.NovaRdtError, RuntimeError):
    pass


def _log_details(case) -> None:
    """What Nova's StandardLogging fixture captured in memory while the
    cloud ran (its log at INFO), into our log."""
    for name, content in sorted(case.getDetails().items()):
        text = "".join(content.iter_text()).rstrip()
        if text:
            LOG.info("Nova's %s while the cloud ran:\n%s", name, text)


def run_in_cloud(config: CloudConfig, body: Callable[[LabCloud], Any]):
    """``body(cloud)`` inside a running cloud; returns its value.

    Raises :class:`CloudError` naming the first error; the tracebacks go
    to the log.
    """
    os.makedirs(config.no_resctrl_dir, exist_ok=True)
    case = LabCloud(config, body)
    result = unittest.TestResult()
    try:
        case.run(result)
    except BaseException:
        # unittest re-raises a KeyboardInterrupt without tearDown or
        # cleanups: Nova's services and fixtures (temporary directories)
        # would outlive the run.
        case.doCleanups()
        raise
    _log_details(case)
    problems = result.errors + result.failures
    if problems:
        for _case, text in problems:
            LOG.error("the Nova stage failed:\n%s", text)
        last = problems[0][1].strip().splitlines()[-1]
        raise CloudError(f"the Nova stage failed: {last}")
    if result.skipped:
        raise CloudError(f"the Nova stage was skipped: "
                         f"{'; '.join(why for _c, why in result.skipped)}")
    return case._value
