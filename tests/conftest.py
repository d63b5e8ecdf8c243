from hypothesis import HealthCheck
from hypothesis import settings

# CI has 2 shared cores: judge properties, not timing (speed belongs in
# benchmarks/).
settings.register_profile("nova-rdt", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("nova-rdt")
