"""`trainfit.autofitter.core`: `autofit()`'s settings from the estimate, its errors in one line,
the live registry and the model left as given; the docs' example and examples/train_autofit.py.

CPU only: "cpu" runs for real (confirm included); GPU catalog devices are estimated only.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.autofitter.support import MLP, MLP_INPUTS, ROOT, mlp_sample
from trainfit.autofitter import autofit
from trainfit.errors import SpecError, TraceError
from trainfit.estimator.step import estimate
from trainfit.models.imports import resolve
from trainfit.plan.options import Accumulation
from trainfit.plan.search import plan
from trainfit.spec import OptimizerKind, Precision, TrainSpec


@pytest.mark.slow
def test_cpu_fit_is_the_estimate_of_the_equivalent_spec() -> None:
    model = MLP()
    fit = autofit(model, mlp_sample(), 64, loss_fn=F.cross_entropy, device="cpu")
    assert fit.local and fit.device.type == "cpu"
    assert (fit.precision, fit.checkpointing, fit.optimizer_kind) == (
        Precision.FP32,
        False,
        OptimizerKind.ADAMW,
    )
    assert fit.micro_batch * fit.grad_accum == fit.effective_batch == 64
    assert fit.scaler is None
    same = TrainSpec(
        model="tests.autofitter.support:make_mlp",
        inputs=MLP_INPUTS,
        step_fn="tests.autofitter.support:mlp_step",
        batch=fit.micro_batch,
        grad_accum=fit.grad_accum,
        device="cpu",
    )
    expected = estimate(same)
    assert fit.predicted_bytes == expected.device_memory_needed_bytes
    assert fit.parameters == fit.trainable_parameters == expected.parameter_count


def test_gpu_catalog_fit_takes_the_plans_setting_and_leaves_the_model_here() -> None:
    model = MLP()
    fit = autofit(model, mlp_sample(), 96, loss_fn=F.cross_entropy, device="rtx-4060")
    same = TrainSpec(
        model="tests.autofitter.support:make_mlp",
        inputs=MLP_INPUTS,
        step_fn="tests.autofitter.support:mlp_step",
        device="rtx-4060",
    )
    setting = plan(same, effective_batch=96, devices=("rtx-4060",), ladder=False).devices[0]
    assert setting.setting is not None
    chosen = (fit.precision, fit.checkpointing, fit.optimizer_kind, fit.micro_batch, fit.grad_accum)
    s = setting.setting
    assert chosen == (s.precision, s.checkpointing, s.optimizer, s.micro_batch, s.grad_accum)
    assert fit.precision is Precision.BF16
    expected = estimate(
        TrainSpec(
            model=same.model,
            inputs=MLP_INPUTS,
            step_fn=same.step_fn,
            batch=fit.micro_batch,
            grad_accum=fit.grad_accum,
            precision=fit.precision,
            device="rtx-4060",
        )
    )
    assert fit.predicted_bytes == expected.device_memory_needed_bytes
    assert not fit.local and fit.device.type == "cuda" and fit.confirmed is None
    assert all(p.device.type == "cpu" for p in model.parameters())
    first, second, third = fit.summary.splitlines()
    assert first == (
        "autofit MLP (15.2 k parameters) for NVIDIA GeForce RTX 4060 8GB: bf16 autocast, "
        "no checkpointing, adamw"
    )
    assert second.startswith("  micro-batch 96 x 1 accumulation = effective batch 96; predicted ")
    assert third == (
        "  estimate only: planned for rtx-4060, not this machine's device (the model was not moved)"
    )


def test_fp16_device_gets_a_scaler() -> None:
    fit = autofit(MLP(), mlp_sample(), 32, loss_fn=F.cross_entropy, device="t4")
    assert fit.precision is Precision.FP16
    assert isinstance(fit.scaler, torch.amp.GradScaler)


class Stack(nn.Module):
    def __init__(self, *blocks: nn.Module) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


@pytest.mark.slow
def test_eight_bit_state_is_never_chosen_without_bitsandbytes() -> None:
    # 537 M parameters on an 8 GB card: fp32 AdamW state does not fit, 8-bit state would
    model = Stack(nn.Linear(16384, 16384), nn.Linear(16384, 16384)).to("meta")
    sample = torch.empty(2, 16384, device="meta")
    with pytest.raises(SpecError, match=r"only with 8-bit AdamW state: install bitsandbytes"):
        autofit(model, sample, 8, device="rtx-4060")
    with pytest.raises(SpecError, match=r"pass the optimizer's name \(optimizer='adamw'\)"):
        autofit(
            model, sample, 8, device="rtx-4060", optimizer=torch.optim.AdamW(model.parameters())
        )
    with pytest.raises(SpecError, match=r"adamw-8bit needs bitsandbytes: pip install bitsandbytes"):
        autofit(model, sample, 8, device="rtx-4060", optimizer="adamw-8bit")


def test_effective_batch_the_micro_batch_does_not_divide_names_the_nearest() -> None:
    with pytest.raises(
        SpecError, match=r"^effective batch 100 is not a multiple of micro-batch"
    ) as e:
        autofit(MLP(), mlp_sample(), 100, micro_batch=32)
    assert "the nearest that work are 96 (32 x 3) or 128 (32 x 4)" in str(e.value)


class Wide(nn.Module):
    """About 86 samples fit an 8 GB card in fp32 without checkpointing."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(1024, 1024), nn.GELU()) for _ in range(8)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x.mean()


def test_prime_effective_batch_over_what_fits_names_the_nearest_that_split() -> None:
    kwargs = {"device": "rtx-4060", "precision": "fp32", "checkpointing": False}
    with pytest.raises(SpecError, match=r"^effective batch 97 does not split") as e:
        autofit(Wide(), torch.randn(2, 1024, 1024), 97, **kwargs)
    assert "the nearest effective batches that split are 96 (48 x 2) or 98 (49 x 2)" in str(e.value)
    fit = autofit(Wide(), torch.randn(2, 1024, 1024), 96, **kwargs)
    assert (fit.micro_batch, fit.grad_accum) == (48, 2)
    assert fit.changes == (Accumulation(micro_batch=48, grad_accum=2),)  # typed, as planned


class Mismatch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(64, 32), nn.Linear(64, 10)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


class Inner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.proj(batch["pixels"])


class Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = Inner()

    def forward(self, **batch: torch.Tensor) -> torch.Tensor:
        return self.inner(batch)


@pytest.mark.parametrize("device", ["cpu", "h100"])
def test_failing_forward_names_the_module_and_the_error(device: str) -> None:
    with pytest.raises(TraceError) as e:
        autofit(Mismatch(), torch.randn(4, 64), 8, device=device)
    text = str(e.value)
    assert "\n" not in text
    assert text.startswith("the training step of Mismatch fails on the sample batch: ")
    assert "in module 'blocks.1'" in text and "RuntimeError" in text
    with pytest.raises(TraceError) as e:
        autofit(Outer(), {"image": torch.randn(4, 4)}, 8, device=device)
    line = Inner.forward.__code__.co_firstlineno + 1
    assert str(e.value) == (
        "the training step of Outer fails on the sample batch in module 'inner' (Inner): "
        f"KeyError: 'pixels' (at {__file__}:{line})"
    )


def test_other_bad_input_is_collected_in_one_error() -> None:
    with pytest.raises(SpecError) as e:
        autofit(
            MLP(),
            mlp_sample(),
            0,
            optimizer=torch.optim.RMSprop(MLP().parameters()),
            precision="fp8",
        )
    text = str(e.value)
    assert "effective_batch must be a positive integer, got 0" in text
    assert "RMSprop is not modelled" in text
    assert "unknown precision 'fp8'" in text
    with pytest.raises(SpecError, match=r"freeze pattern 'backbone\.\*' matches no parameter"):
        autofit(MLP(), mlp_sample(), 8, freeze=["backbone.*"])
    with pytest.raises(SpecError, match=r"^confirm runs one step on this machine's device"):
        autofit(MLP(), mlp_sample(), 8, device="h100", confirm=True)
    with pytest.raises(SpecError, match=r"does not have the batch \(4 rows"):
        autofit(MLP(), (torch.randn(4, 32), torch.zeros(3)), 8)


class FakeCard:
    """What backend_for(None) returns on a machine with an RTX 4060 (runs on the CPU here)."""

    kind = "cuda"
    device = torch.device("cpu")

    def name(self) -> str:
        return "NVIDIA GeForce RTX 4060"


def test_a_catalog_device_of_the_local_kind_is_not_the_local_card(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from trainfit.autofitter import core

    monkeypatch.setattr(core, "backend_for", lambda device: FakeCard())
    monkeypatch.setattr(core, "local_catalog_device", lambda backend: "rtx-4060")
    model = MLP()
    fit = autofit(model, mlp_sample(), 8, loss_fn=F.cross_entropy, device="h200")
    assert not fit.local and fit.catalog_device == "h200"
    assert "estimate only" in fit.summary
    with pytest.raises(SpecError, match=r"^confirm runs one step .* for h200 \(not this"):
        autofit(model, mlp_sample(), 8, loss_fn=F.cross_entropy, device="h200", confirm=True)
    local = autofit(model, mlp_sample(), 8, loss_fn=F.cross_entropy, device="rtx-4060")
    assert local.local and local.catalog_device == "rtx-4060"


class Keeper(nn.Module):
    """Keeps tensors in a list attribute and in a hook object; its loss is a bound method."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(32, 10)
        self.cache = [torch.randn(300, 300)]
        self.body.register_forward_hook(HookWithTensor())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)

    def loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(output, target)


class HookWithTensor:
    def __init__(self) -> None:
        self.big = torch.randn(300, 300)

    def __call__(self, module: nn.Module, args: object, output: torch.Tensor) -> None:
        return None


def test_the_live_registry_keeps_nothing_alive_and_copies_no_nested_data() -> None:
    import gc
    import weakref

    from trainfit.models.live import registered_names

    model, sample = Keeper(), mlp_sample()
    fit = autofit(model, sample, 8, loss_fn=model.loss, device="cpu")
    copy_ = resolve(fit.spec.model, "model factory")()  # NB: resolves while the fit lives
    hook = next(iter(copy_.body._forward_hooks.values()))
    assert copy_.cache[0].is_meta and hook.big.is_meta
    names = [fit.spec.model.split(":")[1], fit.spec.step_fn.split(":")[1]]
    assert set(names) <= set(registered_names())
    refs = [weakref.ref(model), weakref.ref(sample[0])]
    del model, sample, fit, copy_, hook
    gc.collect()
    assert [r() for r in refs] == [None, None]
    assert not set(names) & set(registered_names())
    before = registered_names()
    with pytest.raises(SpecError):
        autofit(MLP(), mlp_sample(), 100, loss_fn=F.cross_entropy, device="cpu", micro_batch=64)
    with pytest.raises(TraceError):
        autofit(Mismatch(), torch.randn(4, 8), 8, device="cpu")
    assert registered_names() == before


def real_only_step(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Traces (meta/fake tensors), but fails in a real step."""
    from torch._subclasses.fake_tensor import is_fake

    if not (batch[0].is_meta or is_fake(batch[0])):
        raise RuntimeError("boom")
    return F.cross_entropy(model(batch[0]), batch[1])


@pytest.mark.slow
def test_argument_errors_and_a_failed_confirm_leave_the_model_as_given() -> None:
    from trainfit.errors import MeasureError

    model = MLP()
    state = lambda: (  # noqa: E731
        [p.requires_grad for p in model.parameters()],
        {p.dtype for p in model.parameters()},
        [n for n, m in model.named_modules() if "forward" in vars(m)],
    )
    before = state()
    with pytest.raises(SpecError, match=r"^confirm runs one step"):
        autofit(
            model,
            mlp_sample(),
            8,
            device="h100",
            confirm=True,
            freeze=["blocks.*"],
            checkpointing=True,
            precision="pure-bf16",
        )
    assert state() == before
    with pytest.raises(MeasureError, match="boom"):
        autofit(
            model,
            mlp_sample(),
            8,
            step_fn=real_only_step,
            device="cpu",
            confirm=True,
            freeze=["blocks.*"],
            checkpointing=True,
        )
    assert state() == before


def test_a_forced_precision_the_device_cannot_run_is_an_error() -> None:
    with pytest.raises(SpecError, match=r"precision='bf16' cannot run on cpu .* supports 'fp32'"):
        autofit(MLP(), mlp_sample(), 8, loss_fn=F.cross_entropy, device="cpu", precision="bf16")
    with pytest.raises(SpecError, match=r"'tf32' cannot run on v100-32gb .* 'fp32', 'fp16'"):
        autofit(MLP(), mlp_sample(), 8, device="v100-32gb", precision="tf32")
    fit = autofit(MLP(), mlp_sample(), 8, loss_fn=F.cross_entropy, device="cpu", precision="fp32")
    assert fit.precision is Precision.FP32


def test_bad_arguments_are_worded_for_python() -> None:
    with pytest.raises(SpecError, match=r"margin must be a number in \[0, 1\), got '0.1'"):
        autofit(MLP(), mlp_sample(), 8, margin="0.1")  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="freeze must be a glob pattern"):
        autofit(MLP(), mlp_sample(), 8, freeze=[3])  # type: ignore[list-item]
    fit = autofit(MLP(), mlp_sample(), 8, loss_fn=F.cross_entropy, device="cpu", freeze="stem.*")
    assert fit.request.freeze == ("stem.*",)
    assert fit.trainable_parameters == fit.parameters - (32 * 64 + 64)
    with pytest.raises(SpecError, match=r"^checkpoint_modules='nothing\.\*' matches no module"):
        autofit(MLP(), mlp_sample(), 8, checkpointing=True, checkpoint_modules="nothing.*")
    if not torch.cuda.is_available():
        from trainfit.errors import MeasureError

        with pytest.raises(MeasureError, match=r'pass device="cpu"'):
            autofit(MLP(), mlp_sample(), 8, device="cuda")


@pytest.mark.slow
def test_docs_first_example_runs() -> None:
    text = (ROOT / "docs" / "autofit.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "docs/autofit.md", "exec"), {"print": lambda *args: None})


@pytest.mark.slow
def test_example_script_trains_on_the_cpu() -> None:
    pytest.importorskip("transformers")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    script = str(ROOT / "examples" / "train_autofit.py")
    done = subprocess.run(
        [sys.executable, script, "--device", "cpu", "--steps", "3"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "stage 1 (blocks frozen)"
    assert lines[1].startswith("autofit GPT2LMHeadModel (37.0 k of 137.0 k parameters trained)")
    assert "confirmed by one real step" in lines[3]
    assert "stage 2 (everything trains)" in lines
    assert [line.split(":")[0] for line in lines if line.startswith("step ")] == [
        "step 1",
        "step 2",
        "step 3",
    ]


def test_example_refuses_a_zero_effective_batch() -> None:
    pytest.importorskip("transformers")
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import train_autofit
    finally:
        sys.path.remove(str(ROOT / "examples"))
    with pytest.raises(SystemExit):
        train_autofit.main(["--device", "cpu", "--effective-batch", "0"])
