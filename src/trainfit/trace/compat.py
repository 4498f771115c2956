"""Which torch releases the tracer's private-API use is checked against.

The tracer leans on torch internals that carry no stability promise: FakeTensorMode and its
converter, dispatch-key guards, Python kernels registered on the AutocastCPU and
CompositeImplicitAutograd keys, `torch.clear_autocast_cache` being looked up at autocast exit.
They are exercised by the test suite on the releases in `TESTED`; other releases within the
package's torch range run with a note in the result, and an internal that has moved becomes a
one-line error naming the torch version.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from trainfit.errors import TraceError

TESTED: tuple[tuple[int, int], ...] = ((2, 11), (2, 13))
"""torch releases the suite runs on: 2.11 on the GPU machine, 2.13 in CI."""
MINIMUM = (2, 4)


def torch_release() -> tuple[int, int]:
    """(major, minor) of the running torch."""
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


@dataclass(frozen=True, kw_only=True, slots=True)
class UntestedTorch:
    """The running torch release is not among those the tracer is tested on."""

    release: tuple[int, int]
    tested: tuple[tuple[int, int], ...]


def check_torch() -> UntestedTorch | None:
    """A note when the running torch is untested; TraceError when it is too old."""
    release = torch_release()
    if release < MINIMUM:
        raise TraceError(
            f"torch {torch.__version__} is too old for the tracer (needs >= "
            f"{MINIMUM[0]}.{MINIMUM[1]}): upgrade torch"
        )
    if release not in TESTED:
        return UntestedTorch(release=release, tested=TESTED)
    return None


def internal_moved(exc: Exception) -> TraceError:
    """The error for a torch internal that is missing or changed in this torch release."""
    return TraceError(
        f"a torch internal the tracer uses is missing or changed in torch {torch.__version__} "
        f"({type(exc).__name__}: {exc}); use a tested release "
        f"({', '.join(f'{a}.{b}' for a, b in TESTED)})"
    )


@contextlib.contextmanager
def registered(dispatch_key: str, kernels: Mapping[str, Callable[..., Any]]) -> Iterator[None]:
    """Register each `kernels[op]` as aten `op`'s kernel for `dispatch_key` for the block, also
    where torch itself registered one from Python (its meta kernels).

    NB: torch 2.13's `Library.impl` overrides such a kernel; torch 2.11's refuses ("already a
    kernel registered from python"), checking a module-level set of keys, which is therefore
    cleared of these keys for the registration and given them back afterwards.
    """
    keys = {f"aten/{op}/{dispatch_key}" for op in kernels}
    known = getattr(torch.library, "_impls", set())
    had = keys & known
    known -= had
    lib = torch.library.Library("aten", "IMPL")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # NB: overriding a kernel warns once per op
            for op, fn in kernels.items():
                lib.impl(op, fn, dispatch_key)
        yield
    finally:
        lib._destroy()
        known |= had
