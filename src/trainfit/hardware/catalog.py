"""Target devices and cloud instances: data with a source for every figure.

The shipped catalog is `devices.json` and `instances.json` in this package; see
trainfit.hardware.figures for the figure format. User catalog files extend or override it:
the `TRAINFIT_CATALOG` environment variable (paths separated by os.pathsep), or
`with using_catalogs([path]): ...` (what `trainfit --catalog PATH` does). A user file has the
same shape, `{"sources": {...}, "devices": {...}, "instances": {...}}`; a row whose name is
already in the catalog replaces the fields it gives and keeps the others, a new name adds a row.

Names accept common spellings: case, spaces, dashes and the vendor words (NVIDIA, GeForce,
Apple, Tesla) are ignored, "RTX" is optional, and a trailing memory size ("8GB") selects the
row with that much memory. Unknown names raise UnknownNameError with close matches.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from importlib import resources
from pathlib import Path

from trainfit.errors import CatalogError, SpecError, TrainfitError, UnknownNameError
from trainfit.hardware.figures import (
    UNKNOWN,
    Figure,
    Problems,
    Source,
    SourceKind,
    number_in,
    one_of,
    parse_figure,
    parse_sources,
)
from trainfit.hardware.instances import Instance, parse_instance
from trainfit.hardware.row_figures import aliases_of, check_cc, figure_specs, memory_of, tflops_of


class DeviceKind(str, Enum):
    """What runs a device's step: a CUDA GPU, an Apple GPU (Metal) or the host CPU. Its text is
    its value, as in the catalog files and the JSON."""

    CUDA = "cuda"
    MPS = "mps"
    CPU = "cpu"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


KINDS = tuple(k.value for k in (DeviceKind.CUDA, DeviceKind.CPU, DeviceKind.MPS))
"""The kinds a catalog row may give, in the order the catalog's errors list them."""
PRICE_KINDS = ("list", "street", "msrp")
ENV_VAR = "TRAINFIT_CATALOG"
DEFAULT_DEVICES = ("h100", "a100-80gb", "rtx-4060")
"""Devices planned when none is named (the rows every catalog version has)."""

_user_files: ContextVar[tuple[str, ...]] = ContextVar("trainfit_user_catalogs", default=())


AMPERE = (8, 0)
"""The first CUDA compute capability with bf16 and tf32 tensor cores (sm80, Ampere)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Price:
    """A dated price of one unit."""

    amount: Figure
    currency: str = "USD"
    kind: str = "list"
    """"list" (launch list price), "street" (a retailer's price on the date) or "msrp"."""
    date: str = ""
    """When the price applied (YYYY-MM-DD or YYYY-MM)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Device:
    """A device trainfit can estimate for (kind "cuda" or "cpu") or list (kind "mps")."""

    name: str
    display: str
    kind: DeviceKind
    """CUDA, CPU or MPS."""
    memory_bytes: int
    """Device memory the estimate compares with: what the runtime reports where measured,
    else the datasheet size read as GiB (0: the host's RAM)."""
    compute_capability: tuple[int, int]
    architecture: str
    runtime_profile: str
    """Key of the runtime-context profile in trainfit.memory.runtime."""
    memory_source: str
    spec_source: str
    aliases: tuple[str, ...] = ()
    memory_gb: Figure = UNKNOWN
    """Memory as the datasheet labels it, in GB."""
    memory_visible_bytes: Figure = UNKNOWN
    """What the runtime reports (torch total_memory, Metal's working-set limit), if known."""
    memory_bandwidth_gbs: Figure = UNKNOWN
    tflops: Mapping[str, Figure] = field(default_factory=dict)
    """Dense peak TFLOP/s per precision (no 2:4 sparsity); each figure's note says which
    tensor-core accumulate variant it is."""
    precisions: Figure = UNKNOWN
    """Training precisions the hardware supports natively (of `row_figures.PRECISIONS`)."""
    tdp_watts: Figure = UNKNOWN
    price: Price | None = None
    pcie_gen: Figure = UNKNOWN
    nvlink_gbs: Figure = UNKNOWN
    """NVLink bandwidth per GPU (GB/s, bidirectional); 0 when the device has none."""
    compute_capability_figure: Figure = UNKNOWN
    sm_count: Figure = UNKNOWN
    """Streaming multiprocessors (the CUDA context grows with them), where the row gives them."""

    @property
    def runtime_key(self) -> tuple[object, ...]:
        """What a memory replay depends on: the cuBLAS workspace (compute capability) and the
        runtime context (profile and SM count)."""
        return (self.runtime_profile, self.compute_capability, self.sm_count.value)

    @property
    def has_bf16(self) -> bool:
        """Whether the device computes in bf16: a CUDA GPU from Ampere on (see `AMPERE`)."""
        return self.kind is DeviceKind.CUDA and tuple(self.compute_capability) >= AMPERE

    @property
    def has_tf32(self) -> bool:
        """Whether fp32 matmuls and convolutions can run as tf32 (a CUDA GPU from Ampere on)."""
        return self.kind is DeviceKind.CUDA and tuple(self.compute_capability) >= AMPERE

    def figures(self) -> dict[str, Figure]:
        """Every figure of the row by field name (tflops as tflops.<precision>)."""
        out = {
            "memory_gb": self.memory_gb,
            "memory_visible_bytes": self.memory_visible_bytes,
            "memory_bandwidth_gbs": self.memory_bandwidth_gbs,
            "precisions": self.precisions,
            "tdp_watts": self.tdp_watts,
            "pcie_gen": self.pcie_gen,
            "nvlink_gbs": self.nvlink_gbs,
            "compute_capability": self.compute_capability_figure,
            "sm_count": self.sm_count,
        }
        out.update({f"tflops.{p}": f for p, f in self.tflops.items()})
        if self.price is not None:
            out["price"] = self.price.amount
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class Catalog:
    """Devices and cloud instances, shipped rows plus the user files'."""

    devices: dict[str, Device]
    instances: dict[str, Instance]
    user_files: tuple[str, ...] = ()
    _spellings: dict[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)
    """Normalised spelling -> device name, built on the first look-up (a plan looks devices up
    hundreds of times; building it took about 0.2 ms each time)."""

    def device(self, name: str) -> Device:
        """The device called `name` (any common spelling); UnknownNameError with close matches."""
        found = _resolve(name, _index(self), self.devices)
        if found is None:
            raise UnknownNameError(
                "device", name, self.devices, hint="run `trainfit devices` for the list"
            )
        return self.devices[found]

    def instance(self, name: str) -> Instance:
        """The cloud instance called `name` (case and separators ignored)."""
        wanted = normalise(name)
        for inst in self.instances.values():
            if wanted in {normalise(inst.name), *(normalise(a) for a in inst.aliases)}:
                return inst
        raise UnknownNameError(
            "instance", name, self.instances, hint="run `trainfit devices --instances`"
        )


# ---------------------------------------------------------------- names


_VENDOR_WORDS = ("nvidia", "geforce", "apple", "tesla")


def normalise(name: str) -> str:
    """Lower case, letters and digits only, vendor words dropped: "NVIDIA RTX 4060" -> "rtx4060"."""
    text = "".join(ch for ch in name.lower() if ch.isalnum())
    for word in _VENDOR_WORDS:
        text = text.replace(word, "")
    return text


def _without_rtx(key: str) -> str:
    return key[3:] if key.startswith("rtx") and len(key) > 3 else key


def _index(catalog: Catalog) -> dict[str, str]:
    """Normalised spelling -> device name (names, aliases, and both without "rtx")."""
    if not catalog._spellings:
        catalog._spellings.update(_build_index(catalog.devices))
    return catalog._spellings


def _build_index(devices: Mapping[str, Device]) -> dict[str, str]:
    index: dict[str, str] = {}
    for device in devices.values():
        for spelling in (device.name, *device.aliases):
            key = normalise(spelling)
            index.setdefault(key, device.name)
            index.setdefault(_without_rtx(key), device.name)
    return index


def _resolve(name: str, index: Mapping[str, str], devices: Mapping[str, Device]) -> str | None:
    key = normalise(name)
    for candidate in (key, _without_rtx(key)):
        if candidate in index:
            return index[candidate]
    # "RTX 3090 24GB": a trailing size is accepted when it is the size of the row named.
    match = re.fullmatch(r"(.+?)(\d+)gb", key)
    if match:
        base, size = match.group(1), int(match.group(2))
        for candidate in (base, _without_rtx(base)):
            found = index.get(candidate)
            if found is not None and devices[found].memory_gb.value == size:
                return found
    return None


# ---------------------------------------------------------------- loading


def _read_json(path: str, problems: Problems) -> dict | None:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        problems.add("", f"cannot read: {exc.strerror or exc}")
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        problems.add("", f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
        return None
    if not isinstance(data, dict):
        problems.add("", f"expected a JSON object at the top, got {type(data).__name__}")
        return None
    unknown = set(data) - {"sources", "devices", "instances", "schema", "notes"}
    if unknown:
        problems.add(
            "", f"unknown top-level keys {sorted(unknown)}; expected sources, devices, instances"
        )
    return data


def _shipped(name: str) -> dict:
    text = resources.files("trainfit.hardware").joinpath(name).read_text("utf-8")
    return json.loads(text)


def _parse_device(
    name: str,
    row: object,
    sources: Mapping[str, Source],
    default_source: Source | None,
    problems: Problems,
) -> Device | None:
    where = f"device {name!r}"
    if not isinstance(row, dict):
        problems.add(where, f"expected an object, got {type(row).__name__}")
        return None
    before = len(problems.items)
    kind = _kind(row, where, problems)
    if kind is None:
        return None
    aliases = aliases_of(row, where, problems)

    def fig(key: str, check: object) -> Figure:
        value = row.get(key)
        if value is None:
            return Figure(value=None, source=None, note="not given")
        return parse_figure(
            value, f"{where}, field {key!r}", problems, sources, check, default_source
        )

    figures = {key: fig(key, check) for key, check in figure_specs().items()}
    cc = fig("compute_capability", check_cc)
    tflops = tflops_of(row.get("tflops", {}), where, sources, default_source, problems)
    price = _price(row.get("price"), where, sources, default_source, problems)
    if kind is DeviceKind.CUDA and not cc.known:
        problems.add(
            f"{where}, field 'compute_capability'", "a CUDA device needs its compute capability"
        )
    if len(problems.items) > before:
        return None
    memory_bytes, memory_figure = memory_of(figures["memory_visible_bytes"], figures["memory_gb"])
    spec = next(
        (f for f in (cc, figures["memory_gb"], figures["memory_bandwidth_gbs"]) if f.source), None
    )
    return Device(
        name=name,
        display=row["display"],
        kind=kind,
        memory_bytes=memory_bytes,
        compute_capability=(int(cc.value[0]), int(cc.value[1])) if cc.known else (0, 0),
        architecture=row["architecture"],
        runtime_profile=row["runtime_profile"],
        memory_source=memory_figure.cite()
        if memory_bytes
        else "the host's RAM (detected at run time)",
        spec_source=spec.cite() if spec else "not applicable",
        aliases=aliases,
        memory_gb=figures["memory_gb"],
        memory_visible_bytes=figures["memory_visible_bytes"],
        memory_bandwidth_gbs=figures["memory_bandwidth_gbs"],
        tflops=tflops,
        precisions=figures["precisions"],
        tdp_watts=figures["tdp_watts"],
        price=price,
        pcie_gen=figures["pcie_gen"],
        nvlink_gbs=figures["nvlink_gbs"],
        compute_capability_figure=cc,
        sm_count=figures["sm_count"],
    )


def _kind(row: dict, where: str, problems: Problems) -> DeviceKind | None:
    """The row's kind, once its required fields are there (None after a problem); the text
    fields are checked too."""
    before = len(problems.items)
    required = ("display", "kind", "architecture", "runtime_profile", "memory_gb")
    for key in required:
        if key not in row:
            problems.add(f"{where}, field {key!r}", "missing")
    if len(problems.items) > before:
        return None
    problem = one_of(KINDS)(row["kind"])
    if problem:
        problems.add(f"{where}, field 'kind'", problem)
        return None
    for key in ("display", "architecture", "runtime_profile"):
        if not isinstance(row[key], str) or not row[key]:
            problems.add(f"{where}, field {key!r}", f"expected text, got {row[key]!r}")
    return DeviceKind(row["kind"])


def _price(
    raw: object,
    where: str,
    sources: Mapping[str, Source],
    default_source: Source | None,
    problems: Problems,
) -> Price | None:
    """The row's dated price, if it gives one."""
    if raw is None:
        return None
    pwhere = f"{where}, field 'price'"
    if not isinstance(raw, dict):
        problems.add(pwhere, f"expected an object with value, currency, kind, date, got {raw!r}")
        return None
    amount = parse_figure(
        raw, pwhere, problems, sources, number_in(20, 200000, "currency units"), default_source
    )
    kind_problem = one_of(PRICE_KINDS)(raw.get("kind", "list"))
    if kind_problem:
        problems.add(f"{pwhere}.kind", kind_problem)
    if amount.known and not raw.get("date"):
        problems.add(f"{pwhere}.date", "a price needs the date it applied")
    return Price(
        amount=amount,
        currency=str(raw.get("currency", "USD")),
        kind=str(raw.get("kind", "list")),
        date=str(raw.get("date", "")),
    )


def _user_source(path: str) -> Source:
    import datetime as dt

    try:
        seen = dt.date.fromtimestamp(os.path.getmtime(path))
    except OSError:
        seen = dt.date.today()
    return Source(
        key=f"user:{path}", url=f"file://{os.path.abspath(path)}", seen=seen, kind=SourceKind.USER
    )


def _load(user_files: tuple[str, ...]) -> Catalog:
    shipped_devices = _shipped("devices.json")
    shipped_instances = _shipped("instances.json")
    problems = Problems()
    sources = parse_sources(shipped_devices.get("sources"), problems, user=False)
    sources.update(parse_sources(shipped_instances.get("sources"), problems, user=False))
    rows: dict[str, tuple[dict, Source | None]] = {
        name: (row, None) for name, row in shipped_devices["devices"].items()
    }
    inst_rows: dict[str, tuple[dict, Source | None]] = {
        name: (row, None) for name, row in shipped_instances["instances"].items()
    }
    if problems.items:  # a bug in the shipped data, not a user mistake
        raise CatalogError("the shipped catalog", problems.items)

    shipped_index = _build_index(_parse_rows(rows, sources, Problems()))
    for path in user_files:
        file_problems = Problems()
        data = _read_json(path, file_problems)
        if data is not None:
            user_sources = parse_sources(data.get("sources"), file_problems, user=True)
            clash = sorted(set(user_sources) & set(sources))
            for key in clash:
                file_problems.add(
                    f"source {key!r}", "this key is already used by the shipped catalog; rename it"
                )
            sources.update(user_sources)
            default = _user_source(path)
            for section, target in (("devices", rows), ("instances", inst_rows)):
                part = data.get(section, {})
                if not isinstance(part, dict):
                    file_problems.add(f"field {section!r}", "expected an object of rows by name")
                    continue
                for name, row in part.items():
                    if not isinstance(row, dict):
                        where = "device" if section == "devices" else "instance"
                        file_problems.add(
                            f"{where} {name!r}", f"expected an object, got {type(row).__name__}"
                        )
                        continue
                    if section == "devices":
                        name = shipped_index.get(normalise(name), name)
                    old = target.get(name, ({}, None))[0]
                    target[name] = ({**old, **row}, default)
            parsed = _parse_rows(
                {n: r for n, r in rows.items() if r[1] is default}, sources, file_problems
            )
            del parsed
            _parse_instance_rows(
                {n: r for n, r in inst_rows.items() if r[1] is default}, sources, file_problems
            )
        if file_problems.items:
            raise CatalogError(path, file_problems.items)

    problems = Problems()
    devices = _parse_rows(rows, sources, problems)
    instances = _parse_instance_rows(inst_rows, sources, problems)
    if problems.items:
        raise CatalogError(", ".join(user_files) or "the shipped catalog", problems.items)
    index = _build_index(devices)
    bad = [
        f"instance {i.name!r}, field 'gpu': {i.gpu!r} is not a device row"
        for i in instances.values()
        if _resolve(i.gpu, index, devices) is None
    ]
    if bad:
        raise CatalogError(", ".join(user_files) or "the shipped catalog", bad)
    return Catalog(devices=devices, instances=instances, user_files=user_files)


def _parse_rows(
    rows: Mapping[str, tuple[dict, Source | None]],
    sources: Mapping[str, Source],
    problems: Problems,
) -> dict[str, Device]:
    out = {}
    for name, (row, default) in rows.items():
        device = _parse_device(name, row, sources, default, problems)
        if device is not None:
            out[name] = device
    return out


def _parse_instance_rows(
    rows: Mapping[str, tuple[dict, Source | None]],
    sources: Mapping[str, Source],
    problems: Problems,
) -> dict[str, Instance]:
    out = {}
    for name, (row, default) in rows.items():
        inst = parse_instance(name, row, sources, default, problems)
        if inst is not None:
            out[name] = inst
    return out


@cache
def _load_cached(user_files: tuple[str, ...], stamps: tuple[float, ...]) -> Catalog:
    del stamps  # part of the cache key: an edited user file is read again
    return _load(user_files)


def _stamp(path: str) -> float:
    try:
        return os.path.getmtime(path)
    except OSError:
        return -1.0


def user_catalog_files() -> tuple[str, ...]:
    """User catalog files in effect: $TRAINFIT_CATALOG, then those of `using_catalogs`."""
    env = tuple(p for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p)
    return env + _user_files.get()


def catalog() -> Catalog:
    """The shipped catalog extended by the user files in effect (cached until a file changes)."""
    files = user_catalog_files()
    return _load_cached(files, tuple(_stamp(p) for p in files))


@contextlib.contextmanager
def using_catalogs(paths: Sequence[str | os.PathLike[str]]) -> Iterator[None]:
    """Within the block, these user catalog files extend the shipped catalog."""
    token = _user_files.set(_user_files.get() + tuple(os.fspath(p) for p in paths))
    try:
        yield
    finally:
        _user_files.reset(token)


def devices() -> dict[str, Device]:
    """All catalog devices by name."""
    return catalog().devices


def instances() -> dict[str, Instance]:
    """All catalog cloud instances by name."""
    return catalog().instances


def get_device(name: str) -> Device:
    """The device called `name` (any common spelling); UnknownNameError with close matches."""
    if not isinstance(name, str):
        raise SpecError(
            [f"a device is named by a str (see `trainfit devices`), got {type(name).__name__}"]
        )
    return catalog().device(name)


def device_names(devices: str | Iterable[str]) -> tuple[str, ...]:
    """The device names of a `devices` argument: one name (a str) or several; a SpecError
    naming the type of anything else."""
    if isinstance(devices, str):
        return (devices,)
    try:
        names = tuple(devices)
    except TypeError:
        names = (devices,)  # type: ignore[assignment]
    odd = sorted({type(n).__name__ for n in names if not isinstance(n, str)})
    if odd:
        raise SpecError(
            [f"devices must be a device name or a list of them (str), got {', '.join(odd)}"]
        )
    return names


def get_instance(name: str) -> Instance:
    """The cloud instance called `name`."""
    return catalog().instance(name)


def cheapest_instance(device: Device, gpus: int) -> tuple[str, int, float | None]:
    """The catalog instance of `device` GPUs that gives `gpus` of them for the least on-demand
    money (instances without a price last), how many of it, and their price.

    NB: one machine with at least `gpus` GPUs, or several machines of eight GPUs or more
    (sharding over one-GPU machines is not offered).
    """
    best: tuple[tuple[bool, float, int], str, int, float | None] | None = None
    for inst in instances().values():
        try:
            gpu = get_device(inst.gpu).name
        except TrainfitError:
            continue
        if gpu != device.name or not inst.gpu_count.known:
            continue
        per_machine = int(inst.gpu_count.value)
        if per_machine < min(gpus, 8):
            continue
        count = math.ceil(gpus / per_machine)
        price = (
            float(inst.on_demand_usd_per_hour.value) * count
            if inst.on_demand_usd_per_hour.known
            else None
        )
        rank = (price is None, price or 0.0, count)
        if best is None or rank < best[0]:
            best = (rank, inst.name, count, price)
    if best is None:
        return "", 0, None
    return best[1], best[2], best[3]
