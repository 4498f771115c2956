"""Cloud instances (data in instances.json): GPU type and count, host size, dated $/hour."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from trainfit.hardware.figures import (
    UNKNOWN,
    Figure,
    Problems,
    Source,
    number_in,
    parse_figure,
)

PROVIDERS = ("aws", "gcp", "azure", "lambda", "colab")


@dataclass(frozen=True, kw_only=True, slots=True)
class Instance:
    """A rentable machine: `gpu_count` GPUs of the device row `gpu`."""

    name: str
    provider: str
    gpu: str
    """Name (or spelling) of a device row."""
    gpu_count: Figure
    vcpus: Figure
    ram_gib: Figure
    on_demand_usd_per_hour: Figure
    spot_usd_per_hour: Figure
    """Spot prices vary; the figure is a dated sample or null with a note."""
    region: str
    aliases: tuple[str, ...] = ()
    note: str = ""

    def figures(self) -> dict[str, Figure]:
        return {
            "gpu_count": self.gpu_count,
            "vcpus": self.vcpus,
            "ram_gib": self.ram_gib,
            "on_demand_usd_per_hour": self.on_demand_usd_per_hour,
            "spot_usd_per_hour": self.spot_usd_per_hour,
        }


_CHECKS = {
    "gpu_count": number_in(1, 64, "GPUs"),
    "vcpus": number_in(1, 512, "vCPUs"),
    "ram_gib": number_in(1, 8192, "GiB"),
    "on_demand_usd_per_hour": number_in(0, 500, "USD/hour"),
    "spot_usd_per_hour": number_in(0, 500, "USD/hour"),
}


def parse_instance(
    name: str,
    row: dict,
    sources: Mapping[str, Source],
    default_source: Source | None,
    problems: Problems,
) -> Instance | None:
    """One instance row; problems name the row and field."""
    where = f"instance {name!r}"
    before = len(problems.items)
    for key in ("provider", "gpu", "gpu_count", "region"):
        if key not in row:
            problems.add(f"{where}, field {key!r}", "missing")
    if len(problems.items) > before:
        return None
    if row["provider"] not in PROVIDERS:
        problems.add(
            f"{where}, field 'provider'",
            f"expected one of {', '.join(PROVIDERS)}, got {row['provider']!r}",
        )
    if not isinstance(row["gpu"], str) or not row["gpu"]:
        problems.add(f"{where}, field 'gpu'", f"expected a device name, got {row['gpu']!r}")
    figures: dict[str, Figure] = {}
    for key, check in _CHECKS.items():
        raw = row.get(key)
        figures[key] = (
            UNKNOWN
            if raw is None
            else parse_figure(
                raw, f"{where}, field {key!r}", problems, sources, check, default_source
            )
        )
    if len(problems.items) > before:
        return None
    return Instance(
        name=name,
        provider=row["provider"],
        gpu=row["gpu"],
        region=str(row["region"]),
        aliases=tuple(row.get("aliases", ())),
        note=str(row.get("note", "")),
        **figures,
    )
