"""The optimizer registry: every entry's factories build its optimizer, whose state after one
step is what the entry's state-bytes rule says; names for the exports; unknown optimizers."""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest
import torch
from torch import nn

from trainfit.errors import SpecError, TrainfitError, UnknownNameError
from trainfit.hardware.catalog import DeviceKind
from trainfit.optim import (
    _REGISTRY,
    OptimizerEntry,
    build_optimizer,
    effective_optimizer,
    measured_optimizer,
    optimizer_entries,
    optimizer_entry,
    optimizer_kind,
    traced_optimizer,
)
from trainfit.spec import LoraSpec, OptimizerKind, OptimizerPath, Precision, TrainSpec
from trainfit.timing.constants import calibration

ENTRIES = optimizer_entries()
IDS = [e.kind.value for e in ENTRIES]
DTYPES = [torch.float32, torch.bfloat16]


def _one_step(make: object, dtype: torch.dtype) -> tuple[nn.Parameter, torch.optim.Optimizer]:
    """A 64x64 weight (4096 elements: bitsandbytes' smallest 8-bit tensor) after one step."""
    torch.manual_seed(0)
    weight = nn.Parameter(torch.randn(64, 64, dtype=dtype))
    optimizer = make([weight])  # type: ignore[operator]
    (weight.float() ** 2).sum().backward()
    optimizer.step()
    return weight, optimizer


def _per_element_bytes(weight: nn.Parameter, optimizer: torch.optim.Optimizer) -> int:
    """Bytes of the state tensors as large as the parameter (what the rule counts)."""
    state = optimizer.state[weight]
    return sum(t.nbytes for t in state.values() if torch.is_tensor(t) and t.shape == weight.shape)


def _dtype_bytes(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def test_every_kind_has_one_entry() -> None:
    assert [e.kind for e in ENTRIES] == list(OptimizerKind)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_real_optimizer_state_is_the_entry_rule(entry: OptimizerEntry, dtype: torch.dtype) -> None:
    if not entry.installed():
        pytest.skip(f"{entry.package} is not installed")
    for make in (
        lambda p: build_optimizer(entry.kind, p),
        lambda p: measured_optimizer(entry.kind, p),
    ):
        weight, optimizer = _one_step(make, dtype)
        assert isinstance(optimizer, entry.optimizer_class())
        assert optimizer_kind(optimizer) is entry.kind
        expected = weight.numel() * entry.state_bytes_per_element(_dtype_bytes(dtype))
        assert _per_element_bytes(weight, optimizer) == expected


@pytest.mark.parametrize("foreach", [True, False])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_traced_optimizer_state_is_the_entry_rule(
    entry: OptimizerEntry, dtype: torch.dtype, foreach: bool
) -> None:
    weight, optimizer = _one_step(lambda p: traced_optimizer(entry.kind, p, foreach), dtype)
    expected = weight.numel() * entry.state_bytes_per_element(_dtype_bytes(dtype))
    assert _per_element_bytes(weight, optimizer) == expected
    if entry.stand_in is None:
        assert optimizer.defaults["foreach"] is (foreach and entry.foreach)
        assert optimizer.defaults["lr"] == entry.step_lr


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_export_names_are_present(entry: OptimizerEntry) -> None:
    assert entry.hf_name(DeviceKind.CPU) == entry.hf_optim
    assert entry.hf_name(DeviceKind.CUDA).startswith(entry.hf_optim)
    prefix = "torch.optim." if entry.package is None else f"{entry.package}.optim."
    assert entry.class_path.startswith(prefix)
    assert entry.short_name.startswith(entry.class_name)
    if entry.package is None:
        assert entry.optimizer_class().__name__ == entry.class_name
    names = pytest.importorskip("transformers.training_args").OptimizerNames
    assert names(entry.hf_name(DeviceKind.CPU)) and names(entry.hf_name(DeviceKind.CUDA))


def test_export_names_of_the_exports() -> None:
    momentum = optimizer_entry(OptimizerKind.SGD_MOMENTUM)
    assert (momentum.hf_name(DeviceKind.CUDA), momentum.hf_optim_args()) == ("sgd", "momentum=0.9")
    assert optimizer_entry(OptimizerKind.ADAM).hf_name(DeviceKind.CUDA) == "adamw_torch_fused"
    assert optimizer_entry(OptimizerKind.ADAMW_8BIT).short_name == "AdamW8bit (bitsandbytes)"


def test_adafactor_keeps_a_full_variance_for_a_vector() -> None:
    # NB: the rule's 0 bytes per element is a lower bound: a 1-D parameter keeps a full-size
    # second moment; a matrix keeps a row and a column
    bias = nn.Parameter(torch.ones(8))
    optimizer = build_optimizer(OptimizerKind.ADAFACTOR, [bias])
    bias.sum().backward()
    optimizer.step()
    assert optimizer.state[bias]["variance"].shape == bias.shape
    assert optimizer_entry(OptimizerKind.ADAFACTOR).state_bytes_per_element(4) == 0


def test_eight_bit_needs_bitsandbytes() -> None:
    if importlib.util.find_spec("bitsandbytes") is not None:
        pytest.skip("bitsandbytes is installed")
    params = [nn.Parameter(torch.ones(2))]
    with pytest.raises(SpecError, match=r"^8-bit AdamW needs bitsandbytes, which is not installed"):
        build_optimizer(OptimizerKind.ADAMW_8BIT, params)
    with pytest.raises(TrainfitError, match=r"'adamw-8bit' needs bitsandbytes for a real run"):
        measured_optimizer(OptimizerKind.ADAMW_8BIT, params)


def test_build_optimizer_like_keeps_the_given_class_and_defaults() -> None:
    params = [nn.Parameter(torch.ones(2))]
    like = torch.optim.AdamW(params, lr=0.5, weight_decay=0.25)
    made = build_optimizer(OptimizerKind.ADAMW, params, like=like, lr=0.1)
    assert type(made) is torch.optim.AdamW
    assert (made.defaults["lr"], made.defaults["weight_decay"]) == (0.1, 0.25)
    sgd = build_optimizer(OptimizerKind.SGD_MOMENTUM, params)
    assert (sgd.defaults["lr"], sgd.defaults["momentum"]) == (1e-3, 0.9)


def test_qlora_trains_adamw_as_eight_bit() -> None:
    qlora = LoraSpec(qlora=True)
    assert effective_optimizer(OptimizerKind.ADAMW, qlora) is OptimizerKind.ADAMW_8BIT
    assert effective_optimizer(OptimizerKind.ADAM, qlora) is OptimizerKind.ADAM
    assert effective_optimizer(OptimizerKind.ADAMW, LoraSpec()) is OptimizerKind.ADAMW
    assert effective_optimizer(OptimizerKind.ADAMW, None) is OptimizerKind.ADAMW


def test_unknown_optimizer_name_lists_the_choices() -> None:
    choices = "adafactor, adam, adamw, adamw-8bit, sgd, sgd-momentum"
    with pytest.raises(
        UnknownNameError, match=rf"^unknown optimizer 'lion'; choose one of {choices}$"
    ):
        optimizer_kind("lion")


def test_unregistered_optimizer_lists_the_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(_REGISTRY, OptimizerKind.ADAFACTOR)
    with pytest.raises(
        UnknownNameError, match=r"^unknown optimizer 'adafactor'; choose one of adam,"
    ):
        optimizer_entry(OptimizerKind.ADAFACTOR)


def test_unmodelled_optimizer_instance_lists_the_choices() -> None:
    rmsprop = torch.optim.RMSprop([nn.Parameter(torch.ones(2))])
    with pytest.raises(SpecError, match=r"RMSprop is not modelled: .* \(adamw, adam, sgd, "):
        optimizer_kind(rmsprop)


def test_an_optimizer_the_calibration_lacks_is_an_error() -> None:
    cal = calibration()
    rows = {k: v for k, v in cal.optimizer_host_seconds_per_param.items() if k != "adamw"}
    lacking = dataclasses.replace(cal, optimizer_host_seconds_per_param=rows)
    spec = TrainSpec(
        model="trainfit.models.zoo:emotion_mlp", optimizer="adam", precision=Precision.FP32
    )
    with pytest.raises(
        TrainfitError,
        match=r"^optimizer 'adam' is timed as 'adamw', whose host cost the .*; "
        r"calibrated: adafactor, sgd, sgd-momentum$",
    ):
        lacking.optimizer_host(spec, 4, OptimizerPath.FOREACH)
    assert cal.optimizer_host(spec, 4, OptimizerPath.FOREACH) == cal.optimizer_host(
        dataclasses.replace(spec, optimizer=OptimizerKind.ADAMW), 4, OptimizerPath.FOREACH
    )


# --- each optimizer's state as PyTorch keeps it, on each path: the trace against a real step --

FAST_PATHS = {("adafactor", "auto", "pure-bf16"), ("adamw", "fused", "fp32")}
PATHS = [
    pytest.param(
        kind,
        path,
        dtype,
        marks=() if (kind, path, dtype) in FAST_PATHS else pytest.mark.slow,
    )
    for kind in ("adamw", "adam", "sgd-momentum", "adafactor")
    for path in ("auto", "foreach", "for-loop", "fused")
    for dtype in ("fp32", "pure-bf16")
    if not (kind == "adafactor" and path == "fused")
]


def _real_state_bytes(spec: TrainSpec) -> tuple[int, int]:
    """(device, host) bytes of the optimizer state after two real CPU steps of `spec`."""
    from trainfit.models.source import build_program
    from trainfit.optim import path_arguments

    program = build_program(spec, "cpu")
    if spec.precision is Precision.PURE_BF16:
        program.model.to(torch.bfloat16)
    entry = optimizer_entry(spec.optimizer)
    params = [p for p in program.model.parameters() if p.requires_grad]
    optimizer = entry.optimizer_class()(
        params,
        **entry.settings,
        lr=entry.step_lr,
        **path_arguments(entry, spec.optimizer_path, False),
    )
    for _ in range(2):
        batch = program.make_batch(torch.device("cpu"), True)
        program.compute_loss(program.model, batch).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    on_device = bool(optimizer.param_groups[0].get("fused"))
    device = host = 0
    for state in optimizer.state.values():
        for name, value in state.items():
            nbytes = value.untyped_storage().nbytes()
            if name == "step" and not on_device:
                host += nbytes
            else:
                device += nbytes
    return device, host


@pytest.mark.parametrize(("kind", "path", "precision"), PATHS)
def test_traced_state_is_the_real_optimizers(kind: str, path: str, precision: str) -> None:
    # Adafactor: a row and a column variance per matrix, a full variance per vector, a step;
    # fused: the step counters on the device; foreach and for-loop: on the host
    from trainfit.trace.step import Category, trace_step

    spec = TrainSpec(
        model="trainfit.models.zoo:emotion_mlp",
        batch=4,
        optimizer=kind,
        optimizer_path=path,
        precision=precision,
        device="h100",
    )
    trace = trace_step(spec, reuse_passes=False)
    sizes = {e.key: e.nbytes for e in trace.events if e.alloc}
    traced = {
        c: sum(sizes[k] for k, kc in trace.categories.items() if kc is c)
        for c in (Category.OPTIMIZER_STATE, Category.HOST)
    }
    device, host = _real_state_bytes(spec)
    assert (traced[Category.OPTIMIZER_STATE], traced[Category.HOST]) == (device, host)
    if kind == "adafactor":
        model = trainfit_zoo_mlp()
        full = sum(p.numel() for p in model.parameters()) * (2 if precision == "pure-bf16" else 4)
        assert device < full / 4  # factored: far less than one full-size moment


def trainfit_zoo_mlp() -> nn.Module:
    from trainfit.models import zoo

    return zoo.emotion_mlp()


def test_the_measured_optimizer_takes_the_path() -> None:
    weight = nn.Parameter(torch.zeros(4, 4))
    fused = measured_optimizer(OptimizerKind.ADAMW, [weight], OptimizerPath.FUSED)
    assert fused.defaults["fused"] is True
    loop = measured_optimizer(OptimizerKind.ADAFACTOR, [weight], OptimizerPath.FOR_LOOP)
    assert loop.defaults["foreach"] is False
    assert measured_optimizer(OptimizerKind.ADAMW, [weight]).defaults["foreach"] is None


def test_a_path_the_optimizer_lacks_is_refused() -> None:
    with pytest.raises(SpecError, match="no fused implementation"):
        traced_optimizer(OptimizerKind.ADAFACTOR, [], True, OptimizerPath.FUSED)
    with pytest.raises(SpecError, match="one implementation"):
        traced_optimizer(OptimizerKind.ADAMW_8BIT, [], True, OptimizerPath.FOREACH)
    with pytest.raises(SpecError, match="unknown optimizer path 'fast'"):
        TrainSpec(model="gpt2", optimizer_path="fast")


def test_run_path_is_the_named_path_or_the_target_s_default() -> None:
    from trainfit.optim import run_path

    auto, loop = OptimizerPath.AUTO, OptimizerPath.FOR_LOOP
    assert run_path(OptimizerKind.ADAMW, auto, target_foreach=True) is OptimizerPath.FOREACH
    assert run_path(OptimizerKind.ADAMW, auto, target_foreach=False) is loop
    assert run_path(OptimizerKind.ADAFACTOR, auto, target_foreach=True) is loop
    assert run_path(OptimizerKind.SGD, OptimizerPath.FUSED, True) is OptimizerPath.FUSED
