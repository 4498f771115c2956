"""Which devices trace a step alike: `traced_alike` over kernel families."""

from __future__ import annotations

import pytest
import torch

from trainfit.trace.kernels.attention import (
    SdpaCall,
    kernel_family,
    traced_alike,
    traced_kernel,
)

HOPPER, AMPERE, ADA, TURING, MAXWELL, OLD = (9, 0), (8, 0), (8, 9), (7, 5), (5, 2), (3, 7)
CAPABILITIES = (HOPPER, AMPERE, ADA, TURING, MAXWELL, OLD)


def _call(
    dtype: torch.dtype = torch.bfloat16, mask: str = "none", dropout: bool = False
) -> SdpaCall:
    return SdpaCall(
        dtype=dtype,
        head_dim=64,
        value_dim=64,
        mask=mask,
        gqa=False,
        strided_mask=False,
        scratch_eligible=dropout,
    )


@pytest.mark.parametrize(
    ("calls", "a", "b", "alike"),
    [
        ([_call()], HOPPER, AMPERE, True),  # NB: cuDNN traced as flash, as Ampere runs
        ([_call()], AMPERE, ADA, True),
        ([_call()], AMPERE, TURING, False),  # NB: flash against memory-efficient
        ([_call(dropout=True)], HOPPER, AMPERE, False),  # NB: cuDNN's dropout scratch
        ([_call(torch.float32)], HOPPER, TURING, True),  # NB: memory-efficient on both
        ([_call(mask="plain")], HOPPER, AMPERE, True),  # NB: memory-efficient on both
        ([_call(torch.float32), _call()], HOPPER, TURING, False),  # NB: one call differs
        ([], HOPPER, OLD, True),  # NB: no attention: nothing depends on the device
    ],
)
def test_steps_trace_alike_where_every_call_runs_the_same_traced_op(
    calls: list[SdpaCall], a: tuple[int, int], b: tuple[int, int], alike: bool
) -> None:
    assert traced_alike(calls, kernel_family(a), kernel_family(b)) is alike
    assert traced_alike(calls, kernel_family(b), kernel_family(a)) is alike


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("mask", ["none", "plain", "grad"])
def test_families_agree_with_the_capabilities_they_stand_for(dtype: torch.dtype, mask: str) -> None:
    calls = [_call(dtype, mask), _call(dtype, mask, dropout=True)]
    for a in CAPABILITIES:
        for b in CAPABILITIES:
            by_capability = all(traced_kernel(c, a) == traced_kernel(c, b) for c in calls)
            assert traced_alike(calls, kernel_family(a), kernel_family(b)) is by_capability
