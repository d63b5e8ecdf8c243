import pytest

from nova_rdt.emulator import mount


@pytest.fixture
def emulator(request):
    """A mounted emulator; parametrize indirectly with a profile name."""
    reason = mount.fuse_unavailable_reason()
    if reason:
        pytest.skip(f"FUSE emulator unavailable: {reason}")
    emu = mount.Emulator(getattr(request, "param", "gold-6252"))
    emu.start()
    yield emu
    emu.stop()


@pytest.fixture
def emulator_e5():
    """A mounted emulated E5-2658 v3 (20 ways: the ONP app note's host)."""
    reason = mount.fuse_unavailable_reason()
    if reason:
        pytest.skip(f"FUSE emulator unavailable: {reason}")
    emu = mount.Emulator("e5-2658-v3")
    emu.start()
    yield emu
    emu.stop()
