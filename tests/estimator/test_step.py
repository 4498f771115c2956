"""estimate(): the traced step, its breakdown and the CUDA target's choices."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from torch import nn

from trainfit import Estimate, TraceError, TrainSpec, estimate
from trainfit.errors import ModelLoadError, SpecError
from trainfit.estimator.result import EmulatedBf16
from trainfit.report.estimate import estimate_dict, estimate_notes
from trainfit.report.model import loss_text
from trainfit.timing.missing import NoTime

GiB = 1 << 30


@pytest.fixture(scope="module")
def gpt2_bf16():
    return estimate(TrainSpec(model="gpt2", batch=2, seq_len=128, precision="bf16"))


def test_breakdown_sums_to_device_memory_needed(gpt2_bf16) -> None:
    result = gpt2_bf16
    assert result.breakdown.total() == result.device_memory_needed_bytes
    assert result.device_memory_needed_bytes == (
        result.peak_reserved_bytes + result.breakdown.runtime_context
    )
    assert result.peak_reserved_bytes >= result.peak_allocated_bytes


def test_parameters_and_optimizer_state_sizes(gpt2_bf16) -> None:
    # fp32 master weights of 124,439,808 parameters (tied embeddings counted once), 512-byte
    # rounding per tensor; AdamW keeps two fp32 moments per parameter
    params = 124_439_808
    assert gpt2_bf16.parameter_count == params
    assert 4 * params <= gpt2_bf16.breakdown.parameters <= 4 * params * 1.005
    assert 8 * params <= gpt2_bf16.breakdown.optimizer_state <= 8 * params * 1.005


def test_cuda_choices_are_modelled(gpt2_bf16) -> None:
    assert gpt2_bf16.attention_kernels == {"cudnn": 12}  # 12 layers, one step
    assert gpt2_bf16.breakdown.workspaces == 2 * 32 * 2**20  # forward + autograd thread handles
    fp32 = estimate(TrainSpec(model="gpt2", batch=2, seq_len=128, precision="fp32"))
    assert fp32.attention_kernels == {"efficient": 12}


def test_json_keys(gpt2_bf16) -> None:
    data = json.loads(json.dumps(estimate_dict(gpt2_bf16)))
    for key in ("device_memory_needed_bytes", "peak_allocated_bytes", "peak_reserved_bytes"):
        assert isinstance(data[key], int) and data[key] > 0
    assert set(data["breakdown"]) == {
        "parameters",
        "gradients",
        "optimizer_state",
        "activations",
        "temporaries",
        "workspaces",
        "allocator_overhead",
        "runtime_context",
    }
    assert data["peak"]["phase"] in ("forward", "backward", "optimizer")
    assert data["spec"]["precision"] == "bf16"


@pytest.mark.slow
def test_pure_bf16_halves_parameters() -> None:
    mixed = estimate(TrainSpec(model="gpt2", batch=1, seq_len=64, precision="bf16"))
    pure = estimate(TrainSpec(model="gpt2", batch=1, seq_len=64, precision="pure-bf16"))
    ratio = pure.breakdown.parameters / mixed.breakdown.parameters
    assert ratio == pytest.approx(0.5, rel=0.03)  # 512-byte rounding of small tensors


@pytest.mark.slow
def test_checkpointing_and_freezing_save_memory() -> None:
    base = estimate(TrainSpec(model="gpt2", batch=8, seq_len=512, precision="bf16"))
    ckpt = estimate(
        TrainSpec(model="gpt2", batch=8, seq_len=512, precision="bf16", checkpointing=True)
    )
    assert ckpt.peak_allocated_bytes < 0.8 * base.peak_allocated_bytes
    frozen = estimate(
        TrainSpec(model="vit-base-patch16-224", batch=4, precision="bf16", freeze=("vit.*",))
    )
    assert frozen.trainable_parameter_count == 768 * 1000 + 1000
    assert frozen.breakdown.optimizer_state < 10 * 2**20


def test_plain_module_default_loss_is_said() -> None:
    result = estimate(TrainSpec(model="trainfit.models.zoo:emotion_mlp", batch=64))
    assert "cross-entropy for (N, C) outputs" in loss_text(result.loss_note)
    assert result.peak_allocated_bytes > 4 * result.parameter_count


def test_unknown_model_has_close_match() -> None:
    with pytest.raises(Exception, match=r"unknown model 'gpt-2'; did you mean 'gpt2'"):
        estimate(TrainSpec(model="gpt-2"))


def test_missing_inputs_for_plain_module() -> None:
    with pytest.raises(SpecError, match=r"needs its inputs: add --input"):
        estimate(TrainSpec(model="torch.nn:Identity"))


def test_bad_import_path() -> None:
    with pytest.raises(ModelLoadError, match=r"cannot import module 'nosuchpkg.mod'"):
        estimate(TrainSpec(model="nosuchpkg.mod:factory", inputs=("x=B,4",)))


@torch.library.custom_op("trainfit_test::opaque", mutates_args=())
def _opaque(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


class _UsesOpaque(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.trainfit_test.opaque(self.proj(x))


def opaque_model() -> nn.Module:
    return _UsesOpaque()


def test_op_without_fake_kernel_names_op_and_module() -> None:
    with pytest.raises(
        TraceError,
        match=r"op trainfit_test.opaque.default in module '_UsesOpaque'.*trainfit measure",
    ):
        estimate(TrainSpec(model="tests.estimator.test_step:opaque_model", inputs=("x=B,4",)))


def test_shape_mismatch_is_named_as_the_users_error() -> None:
    # emotion_mlp takes 128 features; 100 is a wrong --input, not a tracer limitation
    with pytest.raises(TraceError, match=r"op aten\.\w+.* failed: .*check the input shapes"):
        estimate(TrainSpec(model="trainfit.models.zoo:emotion_mlp", inputs=("x=B,100",)))


def test_context_without_cublas_in_backward() -> None:
    from trainfit.memory.runtime import PROFILES, context_bytes

    hopper = PROFILES["hopper-h100-torch2.11-cu130"]
    both = context_bytes(hopper, uses_cublas=True, reduced_precision=False)
    forward_only = context_bytes(
        hopper, uses_cublas=True, reduced_precision=False, backward_cublas=False
    )
    assert both - forward_only == 69_206_016


def test_a_live_module_with_its_sample_is_estimated() -> None:
    net = nn.Linear(4, 3)
    sample = (torch.randn(8, 4), torch.randint(0, 3, (8,)))
    result = estimate(model=net, sample=sample, loss=nn.functional.cross_entropy)
    assert result.spec.batch == 8  # NB: the sample's rows
    assert result.breakdown.parameters > 0
    bigger = estimate(model=net, sample=sample, loss=nn.functional.cross_entropy, batch=4096)
    assert bigger.breakdown.activations > result.breakdown.activations
    assert net.weight.device.type == "cpu"  # NB: the user's module is left as it was


def test_a_live_module_needs_its_sample_and_a_spec_must_be_a_trainspec() -> None:
    with pytest.raises(SpecError, match=r"model is a live Linear: give its batch too"):
        estimate(model=nn.Linear(4, 4))
    with pytest.raises(SpecError, match=r"model is a live Linear: give its batch too"):
        estimate(nn.Linear(4, 4))  # type: ignore[arg-type]  # NB: in spec's place: the model
    assert estimate(nn.Linear(4, 4), sample=torch.randn(2, 4)).spec.batch == 2  # type: ignore[arg-type]
    with pytest.raises(
        SpecError, match=r"^estimate: spec must be a TrainSpec, got str: .* estimate\(model=module"
    ):
        estimate("gpt2")  # type: ignore[arg-type]
    with pytest.raises(SpecError, match=r"sample is the batch of a live model"):
        estimate(model="gpt2", sample=torch.randn(2, 4))


@pytest.mark.parametrize("device", ["t4", "v100-16gb"])
def test_bf16_on_a_card_without_it_is_estimated_with_a_warning(device: str) -> None:
    spec = TrainSpec(
        model="trainfit.models.zoo:emotion_mlp", batch=8, precision="bf16", device=device
    )
    result = estimate(spec)
    assert result.fits
    assert any(isinstance(n, EmulatedBf16) for n in result.notes)
    notes = estimate_notes(result)
    assert any("has no native bf16: PyTorch emulates it" in n for n in notes)
    assert result.step_time is None
    assert result.step_time_missing is not None
    assert result.step_time_missing.why is NoTime.EMULATED_BF16
    assert "bf16 on" in notes[-1] and "is emulated (no bf16 tensor cores)" in notes[-1]
    native = estimate(dataclasses.replace(spec, device="a100-80gb"))
    assert not any("emulates" in n for n in estimate_notes(native))
    assert native.step_time is not None


def test_the_live_module_example_of_the_errors_page_runs() -> None:
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / "errors.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    names: dict[str, object] = {}
    exec(compile(code, "docs/errors.md", "exec"), names)
    result = names["result"]
    assert isinstance(result, Estimate) and result.spec.batch == 64
