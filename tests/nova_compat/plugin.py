"""pytest plugin: Nova's own libvirt functional tests with nova-rdt's driver.

    python -m pytest -p tests.nova_compat.plugin \
        --pyargs nova.tests.functional.libvirt

runs the tests from the installed Nova wheel (under pytest: the glue for
stestr-style tests is below) with every
``compute_driver = libvirt.LibvirtDriver`` loaded as
``rdt.LibvirtRDTDriver`` (``NOVA_RDT_COMPAT_DRIVER=libvirt`` keeps Nova's
own driver, for the counts to compare).  Two things are adapted, neither
of them a behaviour of the driver:

* A few tests put a pass-through spy on ``LibvirtDriver._get_guest_config``
  that calls the driver's bound method saved beforehand.  On a subclass
  that overrides the method and calls ``super()``, the saved method is the
  subclass's, whose ``super()`` call reaches the spy again: a recursion
  the test, not the driver, creates.  A ``fixtures.MonkeyPatch`` of a
  ``LibvirtDriver`` method that ``LibvirtRDTDriver`` overrides is
  re-targeted onto ``LibvirtRDTDriver``, where the spy wraps the whole
  call as the test means it to.
* ``[rdt] require_resctrl`` defaults to False: Nova's tests run on hosts
  without resctrl (and poison /sys), where the driver goes on without RDT
  as an operator's ``require_resctrl = False`` lets it.
"""

from __future__ import annotations

import os

DRIVER_ENV = "NOVA_RDT_COMPAT_DRIVER"
BASE_NAMES = ("nova.virt.libvirt.LibvirtDriver.",
              "nova.virt.libvirt.driver.LibvirtDriver.")
SUBCLASS = "nova_rdt.virt.driver.LibvirtRDTDriver."
# Driver class name -> how many computes loaded it (rdt mode).
LOADED: dict[str, int] = {}


def driver_mode() -> str:
    mode = os.environ.get(DRIVER_ENV, "rdt")
    if mode not in ("rdt", "libvirt"):
        raise ValueError(f"{DRIVER_ENV}={mode!r}: use rdt or libvirt")
    return mode


def retarget(name: str, overridden) -> str:
    """The patch target a spy on ``name`` must have with the subclass."""
    for base in BASE_NAMES:
        if name.startswith(base):
            attr = name[len(base):]
            if "." not in attr and attr in overridden:
                return SUBCLASS + attr
    return name


def swap(name: str | None) -> str | None:
    return "rdt.LibvirtRDTDriver" if name == "libvirt.LibvirtDriver" \
        else name


def install() -> None:
    import fixtures
    from nova.tests.fixtures import conf as conf_fixture
    from nova.virt import driver as virt_driver
    from oslo_config import cfg

    from nova_rdt.virt import driver as rdt_driver

    overridden = {k for k, v in vars(rdt_driver.LibvirtRDTDriver).items()
                  if callable(v)}
    # ConfigOpts.reset() drops defaults set with set_default: set it
    # again in every test's ConfFixture.
    setup = conf_fixture.ConfFixture.setUp

    def conf_setup(self):
        setup(self)
        self.conf.set_default("require_resctrl", False, group="rdt")

    conf_fixture.ConfFixture.setUp = conf_setup

    load = virt_driver.load_compute_driver

    def load_compute_driver(virtapi, compute_driver=None):
        drv = load(virtapi, swap(compute_driver or cfg.CONF.compute_driver))
        name = type(drv).__name__
        LOADED[name] = LOADED.get(name, 0) + 1
        return drv

    virt_driver.load_compute_driver = load_compute_driver

    init = fixtures.MonkeyPatch.__init__

    def monkeypatch_init(self, name, *args, **kwargs):
        init(self, retarget(name, overridden), *args, **kwargs)

    fixtures.MonkeyPatch.__init__ = monkeypatch_init


def nova_test_glue() -> None:
    """What Nova's tests need under pytest, with either driver.

    * eventlet's monkey patching first, as nova/tests/functional/__init__
      does, before anything else imports threading primitives;
    * ``[wsgi] api_paste_config``: ConfFixture points it inside
      site-packages, where the wheel does not put api-paste.ini;
    * ``nova.test.TestCase._clear_attrs`` would delete the bound test
      method pytest keeps on the instance (see tests/functional/nova).
    """
    from nova import monkey_patch
    monkey_patch.patch()

    import nova.test
    from nova.tests.fixtures import conf as conf_fixture

    from nova_rdt.lab.nova_paste import nova_api_paste_ini

    paste = nova_api_paste_ini()
    if paste is None:
        raise RuntimeError("the installed Nova has no api-paste.ini")
    setup = conf_fixture.ConfFixture.setUp

    def conf_setup(self):
        setup(self)
        self.conf.set_default("api_paste_config", paste, group="wsgi")

    conf_fixture.ConfFixture.setUp = conf_setup

    def _clear_attrs(self):
        keep = {"id", self._testMethodName}
        for key in [k for k in self.__dict__ if k[0] != "_" and
                    k not in keep]:
            del self.__dict__[key]

    nova.test.TestCase._clear_attrs = _clear_attrs


def pytest_configure(config):
    mode = driver_mode()
    nova_test_glue()
    if mode == "rdt":
        install()


def pytest_report_header(config):
    return f"nova-compat: compute driver {driver_mode()}"


def pytest_terminal_summary(terminalreporter):
    if driver_mode() == "rdt":
        loaded = ", ".join(f"{k} x{v}" for k, v in sorted(LOADED.items()))
        terminalreporter.write_line(
            f"nova-compat: drivers loaded: {loaded or 'none'}")
