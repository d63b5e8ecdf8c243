from hypothesis import HealthCheck
from hypothesis import settings
import pytest

from nova_rdt.resctrl import capcache

# CI has 2 shared cores: judge properties, not timing (speed belongs in
# benchmarks/).
settings.register_profile("nova-rdt", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("nova-rdt")


@pytest.fixture(autouse=True)
def _fresh_capabilities():
    """Each test starts with no capabilities known: the per-mount cache
    outlives a test's emulator, and a test that counts discoveries
    counts its own."""
    capcache.CACHE.clear()
    yield
