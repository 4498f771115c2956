"""Render the device and cloud-instance catalogs: rich tables and JSON-ready dicts."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import JustifyMethod
from rich.table import Table

from trainfit.hardware.catalog import Device, DeviceKind
from trainfit.hardware.figures import Figure
from trainfit.hardware.instances import Instance
from trainfit.hardware.units import GIB
from trainfit.report.tables import FitTable


def _num(figure: Figure, fmt: str = "{:g}") -> str:
    return fmt.format(figure.value) if figure.known else "?"


def _memory(device: Device) -> str:
    if device.kind is DeviceKind.CPU:
        return "host RAM"
    return f"{device.memory_bytes / GIB:.1f} GiB" if device.memory_bytes else "?"


def devices_table(devices: Iterable[Device]) -> Table:
    """One row per device: the key figures ("?" where no source was found).

    The 16-bit column is bf16 where known, else fp16 (dense tensor-core rate)."""
    devices = list(devices)
    table = FitTable(title="device catalog (? = not sourced; `--json` for every source)")
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("name", "left"),
        ("kind", "left"),
        ("memory", "right"),
        ("GB/s", "right"),
        ("16-bit TFLOP/s", "right"),
        ("fp32 TFLOP/s", "right"),
        ("CC", "right"),
        ("TDP W", "right"),
    )
    for column, justify in columns:
        table.add_column(column, justify=justify, no_wrap=True)
    table.columns[0].min_width = max((len(d.name) for d in devices), default=4)
    for d in devices:
        bf16 = d.tflops.get("bf16") or d.tflops.get("fp16")
        table.add_row(
            d.name,
            d.kind.value,
            _memory(d),
            _num(d.memory_bandwidth_gbs),
            _num(bf16) if bf16 else "?",
            _num(d.tflops["fp32"]) if "fp32" in d.tflops else "?",
            ".".join(map(str, d.compute_capability)) if d.kind is DeviceKind.CUDA else "-",
            _num(d.tdp_watts),
        )
    return table


def instances_table(instances: Iterable[Instance]) -> Table:
    """One row per cloud instance."""
    table = FitTable(title="cloud instances (? = not sourced; `--json` for every source)")
    for column in ("name", "GPUs", "vCPUs", "RAM GiB", "$/h on-demand", "$/h spot", "region"):
        table.add_column(column, no_wrap=True)
    for i in instances:
        table.add_row(
            i.name,
            f"{_num(i.gpu_count)} x {i.gpu}",
            _num(i.vcpus),
            _num(i.ram_gib),
            _num(i.on_demand_usd_per_hour),
            _num(i.spot_usd_per_hour),
            i.region,
        )
    return table


def figure_dict(figure: Figure) -> dict[str, object]:
    """A figure with its source (URL, date seen) or the note saying why it is missing."""
    out: dict[str, object] = {
        "value": list(figure.value) if isinstance(figure.value, tuple) else figure.value
    }
    if figure.source is not None:
        out["source"] = figure.source.url
        out["seen"] = figure.source.seen.isoformat()
        out["source_kind"] = figure.source.kind.value
    if figure.note:
        out["note"] = figure.note
    return out


def device_dict(device: Device) -> dict[str, object]:
    out: dict[str, object] = {
        "name": device.name,
        "display": device.display,
        "kind": device.kind.value,
        "architecture": device.architecture,
        "compute_capability": list(device.compute_capability),
        "memory_bytes": device.memory_bytes,
        "runtime_profile": device.runtime_profile,
        "aliases": list(device.aliases),
    }
    out.update({key: figure_dict(fig) for key, fig in device.figures().items()})
    if device.price is not None:
        out["price"] = {
            **figure_dict(device.price.amount),
            "currency": device.price.currency,
            "kind": device.price.kind,
            "date": device.price.date,
        }
    return out


def instance_dict(instance: Instance) -> dict[str, object]:
    out: dict[str, object] = {
        "name": instance.name,
        "provider": instance.provider,
        "gpu": instance.gpu,
        "region": instance.region,
        "aliases": list(instance.aliases),
    }
    if instance.note:
        out["note"] = instance.note
    out.update({key: figure_dict(fig) for key, fig in instance.figures().items()})
    return out
