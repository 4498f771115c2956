"""The figures of one device row of the catalog: which fields are figures and their ranges,
the compute capability, the TFLOP/s per precision, the aliases, and the memory the estimate
compares with (see `trainfit.hardware.catalog`)."""

from __future__ import annotations

from collections.abc import Mapping

from trainfit.hardware.figures import Figure, Problems, Source, list_of, number_in, parse_figure
from trainfit.hardware.units import GIB

PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8")
"""The precisions a row's `tflops` and `precisions` may name."""


def figure_specs() -> dict[str, object]:
    return {
        "memory_gb": number_in(1, 1024, "GB"),
        "memory_visible_bytes": number_in(GIB, 1024 * GIB, "bytes"),
        "memory_bandwidth_gbs": number_in(10, 20000, "GB/s"),
        "tdp_watts": number_in(5, 2000, "W"),
        "pcie_gen": number_in(3, 6, "PCIe generation"),
        "nvlink_gbs": number_in(0, 3600, "GB/s"),
        "sm_count": number_in(1, 1000, "SMs"),
        "precisions": list_of(PRECISIONS),
    }


def check_cc(value: object) -> str | None:
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(v, int) and 0 <= v <= 20 for v in value)
    ):
        return f"expected [major, minor], got {value!r}"
    return None


def aliases_of(row: dict, where: str, problems: Problems) -> tuple[str, ...]:
    aliases = row.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a for a in aliases):
        problems.add(f"{where}, field 'aliases'", f"expected a list of names, got {aliases!r}")
        return ()
    return tuple(aliases)


def tflops_of(
    raw: object,
    where: str,
    sources: Mapping[str, Source],
    default_source: Source | None,
    problems: Problems,
) -> dict[str, Figure]:
    """The dense peak TFLOP/s per precision."""
    tflops: dict[str, Figure] = {}
    if not isinstance(raw, dict):
        problems.add(f"{where}, field 'tflops'", f"expected an object, got {raw!r}")
        return tflops
    for precision, value in raw.items():
        if precision not in PRECISIONS:
            problems.add(
                f"{where}, field 'tflops.{precision}'",
                f"unknown precision; expected one of {', '.join(PRECISIONS)}",
            )
            continue
        tflops[precision] = parse_figure(
            value,
            f"{where}, field 'tflops.{precision}'",
            problems,
            sources,
            number_in(0.1, 20000, "TFLOP/s"),
            default_source,
        )
    return tflops


def memory_of(visible: Figure, nominal: Figure) -> tuple[int, Figure]:
    """The bytes the estimate compares with, and the figure they come from."""
    # NB: without a measurement the datasheet's "GB" is read as GiB (HBM and GDDR sizes are
    # binary); the runtime reports 0.5-1 GiB less (driver reservation, ECC).
    if visible.known:
        return int(visible.value), visible
    if nominal.known:
        return int(nominal.value * GIB), nominal
    return 0, nominal
