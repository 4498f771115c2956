"""The device and cloud-instance catalogs: every row sourced and sane, spellings, user files."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path

import pytest

from trainfit.cli.main import main
from trainfit.errors import CatalogError, UnknownNameError
from trainfit.hardware.catalog import (
    DeviceKind,
    catalog,
    get_device,
    get_instance,
    normalise,
    using_catalogs,
)
from trainfit.hardware.figures import SourceKind
from trainfit.hardware.units import GIB

CAT = catalog()
DEVICES = list(CAT.devices)
INSTANCES = list(CAT.instances)
TODAY = dt.date(2026, 11, 27)

REQUIRED_DEVICES = {
    "m1-pro-16gb", "m2-16gb", "m3-max", "m4-pro-16gb", "m4-pro-24gb", "m4-pro-48gb",
    "rtx-3060", "rtx-3090", "rtx-4060", "rtx-4070-ti-super", "rtx-4090", "rtx-5060-ti",
    "rtx-5090", "t4", "v100-16gb", "v100-32gb", "a10g", "l4", "l40s", "a100-40gb",
    "a100-80gb", "h100", "h100-pcie", "h200", "cpu",
}  # fmt: skip
REQUIRED_INSTANCES = {
    "aws-g4dn.xlarge", "aws-g5.xlarge", "aws-g5.2xlarge", "aws-p3.2xlarge",
    "aws-p4d.24xlarge", "aws-p5.48xlarge", "gcp-a2-highgpu-1g", "gcp-a2-megagpu-16g",
    "gcp-a3-highgpu-8g", "gcp-g2-standard-8", "azure-nc6s-v3", "azure-nd96amsr-a100-v4",
}  # fmt: skip


@pytest.fixture(autouse=True)
def _no_env_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRAINFIT_CATALOG", raising=False)


def test_catalog_has_the_issue_rows() -> None:
    assert set(CAT.devices) >= REQUIRED_DEVICES, sorted(REQUIRED_DEVICES - set(CAT.devices))
    assert set(CAT.instances) >= REQUIRED_INSTANCES
    providers = {i.provider for i in CAT.instances.values()}
    assert {"lambda", "colab"} <= providers


@pytest.mark.parametrize("name", DEVICES)
def test_device_row_is_sourced_and_sane(name: str) -> None:
    device = CAT.devices[name]
    assert device.kind in {"cuda", "cpu", "mps"}
    assert device.display and device.architecture
    for field, figure in device.figures().items():
        if figure.value is None:
            assert figure.note, f"{field}: a null figure needs a note"
            continue
        source = figure.source
        assert source is not None, field
        assert source.kind is not SourceKind.USER
        if source.kind in (SourceKind.MEASURED, SourceKind.FITTED):
            assert (Path(__file__).parents[2] / source.url).exists(), source.url
        else:
            assert source.url.startswith("https://"), source.url
        assert dt.date(2020, 1, 1) <= source.seen <= TODAY, source.seen
    if device.kind is DeviceKind.CUDA:
        assert device.compute_capability_figure.known
        assert (7, 0) <= device.compute_capability <= (12, 9)
        expected = "hopper-h100-torch2.11-cu130" if name == "h100" else "modelled-from-hopper"
        if device.sm_count.known and "GeForce" in device.display:
            # the GeForce context rule needs the SM count, and every GeForce row with one uses it
            expected = "geforce-oom-fit"
        assert device.runtime_profile == expected
    if device.memory_bytes:
        assert 4 * GIB <= device.memory_bytes <= 256 * GIB
    fp32 = device.tflops.get("fp32")
    for precision, figure in device.tflops.items():
        if figure.known and fp32 is not None and fp32.known and precision != "fp32":
            assert figure.value >= fp32.value * 0.99, (precision, "tensor rates are >= fp32")
    if device.price is not None and device.price.amount.known:
        assert device.price.currency == "USD" and device.price.date


@pytest.mark.parametrize("name", INSTANCES)
def test_instance_row_is_sourced_and_resolves(name: str) -> None:
    inst = CAT.instances[name]
    assert get_device(inst.gpu).name == inst.gpu
    assert inst.gpu_count.known or inst.gpu_count.note
    for field, figure in inst.figures().items():
        if figure.value is None:
            assert figure.note, field
        else:
            assert figure.source is not None and figure.source.url.startswith("https://"), field
            assert figure.source.seen <= TODAY
    assert all(get_instance(alias).name == name for alias in (name, *inst.aliases))


def test_names_and_aliases_are_unambiguous() -> None:
    seen: dict[str, str] = {}
    for device in CAT.devices.values():
        for spelling in (device.name, *device.aliases):
            key = normalise(spelling)
            assert seen.setdefault(key, device.name) == device.name, (spelling, seen[key])


@pytest.mark.parametrize(
    ("spelling", "name"),
    [
        ("4060", "rtx-4060"),
        ("rtx4060", "rtx-4060"),
        ("RTX 4060 8GB", "rtx-4060"),
        ("NVIDIA GeForce RTX 4060", "rtx-4060"),
        ("h100 pcie", "h100-pcie"),
        ("H100", "h100"),
        ("nvidia h100 80gb hbm3", "h100"),
        ("M4 Pro 24GB", "m4-pro-24gb"),
        ("m4 pro 48gb", "m4-pro-48gb"),
        ("a100 40gb", "a100-40gb"),
        ("A100", "a100-80gb"),
        ("Tesla T4", "t4"),
        ("RTX 3090 24GB", "rtx-3090"),
        ("rtx 4070 ti super", "rtx-4070-ti-super"),
        ("Apple M1 Pro", "m1-pro-16gb"),
        ("cpu", "cpu"),
    ],
)
def test_spellings(spelling: str, name: str) -> None:
    assert get_device(spelling).name == name


def test_a_catalog_copy_with_other_rows_looks_up_its_own() -> None:
    # NB: the spellings are worked out on a catalog's first look-up and kept; a copy with
    # other rows must not reuse them
    shipped = catalog()
    assert shipped.device("NVIDIA H100").name == "h100"
    only_t4 = dataclasses.replace(shipped, devices={"t4": shipped.devices["t4"]})
    assert only_t4.device("Tesla T4").name == "t4"
    with pytest.raises(UnknownNameError, match="unknown device 'h100'"):
        only_t4.device("h100")
    assert shipped.device("h100").name == "h100"


def test_unknown_name_lists_close_matches() -> None:
    with pytest.raises(
        UnknownNameError, match=r"unknown device 'rtx-4080'; did you mean 'rtx-4090'"
    ):
        get_device("rtx-4080")
    with pytest.raises(UnknownNameError, match="unknown device 'rtx 4060 16gb'"):
        get_device("rtx 4060 16gb")  # a size that is not the row's


def _write(tmp_path: Path, data: object, name: str = "mine.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_user_file_adds_and_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(
        tmp_path,
        {
            "devices": {
                "my-card": {
                    "display": "Lab card",
                    "kind": "cuda",
                    "architecture": "ada",
                    "runtime_profile": "modelled-from-hopper",
                    "memory_gb": 20,
                    "compute_capability": [8, 9],
                    "aliases": ["lab card"],
                },
                "RTX 4060": {"memory_visible_bytes": 8585740288},
            }
        },
    )
    with using_catalogs([path]):
        card = get_device("Lab Card")
        assert card.memory_bytes == 20 * GIB
        assert card.memory_gb.source is not None
        assert card.memory_gb.source.kind is SourceKind.USER
        assert get_device("4060").memory_bytes == 8585740288
        assert (
            get_device("4060").memory_bandwidth_gbs == CAT.devices["rtx-4060"].memory_bandwidth_gbs
        )
    # outside the block: shipped rows (the GeForce visible-memory rule for an 8 GB card)
    assert get_device("4060").memory_bytes == CAT.devices["rtx-4060"].memory_visible_bytes.value
    monkeypatch.setenv("TRAINFIT_CATALOG", str(path))
    assert get_device("my-card").name == "my-card"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            "{not json",
            "not valid JSON: Expecting property name enclosed in double quotes at line 1 column 2",
        ),
        (
            {"devices": {"h100": {"memory_gb": "lots"}}},
            "device 'h100', field 'memory_gb': expected a number (GB), got 'lots'",
        ),
        (
            {"devices": {"x": {"display": "X", "kind": "tpu"}}},
            "device 'x', field 'architecture': missing; device 'x', field 'runtime_profile': "
            "missing; device 'x', field 'memory_gb': missing",
        ),
        (
            {"devices": {"h100": {"tdp_watts": 70000}}},
            "device 'h100', field 'tdp_watts': 70000 W is outside the sane range 5..2000",
        ),
        (
            {"devices": {"h100": {"tflops": {"fp4": 9000}}}},
            "device 'h100', field 'tflops.fp4': unknown precision; expected one of fp32, tf32, "
            "fp16, bf16, fp8",
        ),
        (
            {
                "instances": {
                    "my-box": {"provider": "aws", "gpu": "b300", "gpu_count": 8, "region": "x"}
                }
            },
            "instance 'my-box', field 'gpu': 'b300' is not a device row",
        ),
    ],
)
def test_malformed_user_file_is_one_clear_error(tmp_path: Path, data: object, message: str) -> None:
    path = _write(tmp_path, data)
    with pytest.raises(CatalogError) as info, using_catalogs([path]):
        get_device("h100")
    assert str(info.value) == f"catalog file {path}: {message}"


def test_malformed_user_file_in_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, {"devices": {"h100": {"memory_gb": "lots"}}})
    assert main(["devices", "--catalog", str(path)]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"trainfit: error: catalog file {path}: device 'h100', field 'memory_gb': "
        "expected a number (GB), got 'lots'\n"
    )
    assert main(["estimate", "gpt2", "--catalog", str(path)]) == 1
    assert "field 'memory_gb'" in capsys.readouterr().err


def test_macs_are_limited_to_metals_working_set() -> None:
    """An Apple GPU's usable memory is Metal's recommended working set: 2/3 of the RAM in the
    field reports up to 32 GB (16 GB: 10922.67 MiB), assumed for 48 GB too."""
    assert get_device("m1-pro-16gb").memory_bytes == 16 * 2**30 * 2 // 3
    assert round(get_device("m1-pro-16gb").memory_bytes / 2**20, 2) == 10922.67
    assert get_device("m4-pro-24gb").memory_bytes == 16 * 2**30
    for name in ("m1-pro-16gb", "m2-16gb", "m3-max", "m4-pro-16gb", "m4-pro-24gb", "m4-pro-48gb"):
        device = get_device(name)
        assert device.kind is DeviceKind.MPS and device.memory_visible_bytes.source, name


def test_devices_cli_table(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "120")  # NB: narrower, each device is a block of lines
    assert main(["devices"]) == 0
    out = capsys.readouterr().out
    lines = {line.split("│")[1].strip(): line for line in out.splitlines() if line.startswith("│")}
    assert set(lines) == set(CAT.devices)
    assert [c.strip() for c in lines["h100"].split("│")[1:-1]] == [
        "h100", "cuda", "79.2 GiB", "3350", "989.4", "66.9", "9.0", "700",
    ]  # fmt: skip
    # figures a row does not have show as "?" (a user row with only the required fields)
    bare = {
        "display": "Bare card",
        "kind": "cuda",
        "architecture": "ada",
        "runtime_profile": "modelled-from-hopper",
        "memory_gb": None,
        "compute_capability": [8, 9],
    }
    path = _write(tmp_path, {"devices": {"bare-card": bare}})
    assert main(["devices", "--catalog", str(path)]) == 0
    out = capsys.readouterr().out
    lines = {line.split("│")[1].strip(): line for line in out.splitlines() if line.startswith("│")}
    assert [c.strip() for c in lines["bare-card"].split("│")[1:-1]][2:] == ["?"] * 4 + [
        "8.9",
        "?",
    ]


def test_devices_cli_json_and_instances(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["devices", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    h100 = rows["h100"]
    assert h100["tflops.bf16"]["value"] == 989.4
    assert h100["tflops.bf16"]["source"].startswith("https://")
    assert h100["tflops.bf16"]["seen"] == "2026-11-26"
    unknown = [
        (name, field)
        for name, row in rows.items()
        for field, value in row.items()
        if isinstance(value, dict) and "value" in value and value["value"] is None
    ]
    assert unknown  # the catalog still has gaps, each said why
    for name, field in unknown:
        assert rows[name][field]["note"], (name, field)
    assert main(["devices", "--instances", "--json"]) == 0
    inst = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert inst["aws-p5.48xlarge"]["gpu"] == "h100"
    assert main(["devices", "--instances"]) == 0
    assert "8 x h100" in capsys.readouterr().out


def test_bf16_and_tf32_come_with_ampere_on_cuda_only() -> None:
    """One home for the rule: CUDA from compute capability 8.0; never an Apple GPU or the CPU."""
    from trainfit.hardware.catalog import get_device

    assert [get_device(n).has_bf16 for n in ("t4", "v100-16gb", "a100-80gb", "h100")] == [
        False,
        False,
        True,
        True,
    ]
    assert get_device("rtx-3090").has_tf32 and not get_device("t4").has_tf32
    assert not get_device("m1-pro-16gb").has_bf16 and not get_device("cpu").has_tf32


def test_devices_are_one_name_or_several() -> None:
    from trainfit.errors import SpecError
    from trainfit.hardware.catalog import device_names, get_device

    assert device_names("rtx-4060") == ("rtx-4060",)
    assert device_names(["h100", "a100"]) == ("h100", "a100")
    with pytest.raises(SpecError, match=r"devices must be .* \(str\), got int"):
        device_names(["h100", 3])  # type: ignore[list-item]
    with pytest.raises(SpecError, match=r"a device is named by a str .* got int"):
        get_device(3)  # type: ignore[arg-type]
