"""The library's pre-write checks against the emulator's kernel rules.

Production code checks a mask before writing it; the emulator refuses it
as the kernel would.  They must agree on every mask, word for word, or an
operator would see one reason in a log and another from the kernel.
"""

import errno

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from nova_rdt.emulator.kernel import KernelError
from nova_rdt.resctrl import cbm
from tests.kernel_fixtures import KERNELS
from tests.kernel_fixtures import make_kernel

PROFILES = ["gold-6252", "e5-2658-v3", "amd-epyc", "xeon-w-11865mre"]


@settings(max_examples=300)
@given(st.sampled_from(PROFILES), st.integers(0, (1 << 21) - 1),
       st.sampled_from(KERNELS))
def test_same_verdict_and_wording(profile, mask, kernel):
    k, _, _ = make_kernel(profile, kernel=kernel)
    l3 = k.profile.l3
    k.mkdir("g")
    try:
        cbm.check(mask, l3.cbm_len, l3.min_cbm_bits, l3.sparse_masks)
        library = None
    except cbm.CbmError as e:
        library = str(e)
    try:
        k.write("g/schemata", f"L3:0={mask:x}\n".encode())
        kernel = None
    except KernelError as e:
        assert e.errno == errno.EINVAL
        kernel = k.last_cmd_status().strip()
    assert library == kernel


@given(st.integers(0, 120), st.sampled_from(KERNELS))
def test_mb_rounding_agrees(value, kernel):
    k, _, _ = make_kernel(kernel=kernel)
    k.mkdir("g")
    try:
        want = cbm.mb_round(value, 10, 10, 100)
    except ValueError as e:
        want = str(e)
    try:
        k.write("g/schemata", f"MB:0={value}\n".encode())
        # Padded before 6.15 (" 20"), bare after: int() reads both.
        got = int(k.read("g/schemata").splitlines()[0].split("=")[1]
                  .split(";")[0])
    except KernelError:
        got = k.last_cmd_status().strip()
    assert want == got
