"""autofit on live models: settings from the estimate, applied to the model, errors in one line.

CPU only: "cpu" runs for real (confirm included); GPU catalog devices are estimated only.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from trainfit.autofitter import Fit, autofit
from trainfit.errors import SpecError, TraceError
from trainfit.estimator.step import estimate
from trainfit.models.imports import resolve
from trainfit.models.live import CHECKPOINT_MARK
from trainfit.plan.options import Accumulation
from trainfit.plan.search import plan
from trainfit.spec import OptimizerKind, Precision, TrainSpec

ROOT = Path(__file__).resolve().parents[1]


class MLP(nn.Module):
    """Three blocks in a ModuleList and a head: the blocks are what checkpointing wraps."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(32, 64)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(64, 64), nn.GELU()) for _ in range(3))
        self.head = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def make_mlp() -> MLP:
    """The factory of the spec equivalent to an autofit of MLP."""
    return MLP()


def mlp_step(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The step autofit runs for `(x, y)` batches and loss_fn=F.cross_entropy."""
    return F.cross_entropy(model(batch["input_0"]), batch["input_1"])


MLP_INPUTS = ("input_0=B,32:float32", "input_1=B:int64<10")


def mlp_sample(rows: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    y = torch.arange(rows) % 10
    y[0] = 9
    return torch.randn(rows, 32), y


def tiny_gpt2() -> nn.Module:
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(
        n_layer=2,
        n_embd=64,
        n_head=2,
        vocab_size=128,
        n_positions=64,
        bos_token_id=0,
        eos_token_id=0,
    )
    return transformers.GPT2LMHeadModel(config)


def gpt2_sample(rows: int = 2) -> dict[str, torch.Tensor]:
    ids = torch.randint(128, (rows, 32))
    return {"input_ids": ids, "labels": ids}


# --- the chosen settings against the estimate ----------------------------------------------


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
        model="tests.test_autofit:make_mlp",
        inputs=MLP_INPUTS,
        step_fn="tests.test_autofit:mlp_step",
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
        model="tests.test_autofit:make_mlp",
        inputs=MLP_INPUTS,
        step_fn="tests.test_autofit:mlp_step",
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


# --- the user's model ------------------------------------------------------------------------


@pytest.mark.slow
def test_weights_are_not_copied_and_confirm_restores_them() -> None:
    model = MLP()
    params = list(model.parameters())
    values = [p.detach().clone() for p in params]
    pointers = [p.data_ptr() for p in params]
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    fit = autofit(
        model, mlp_sample(), 8, optimizer=optimizer, loss_fn=F.cross_entropy, confirm=True
    )
    # the estimate traced a meta copy: the registered factory holds no weights
    copy = resolve(fit.spec.model, "model factory")()
    assert all(p.is_meta for p in copy.parameters())
    assert not any(p is q for p in copy.parameters() for q in params)
    # the real step ran on the model itself and was undone
    assert fit.confirmed is not None and fit.confirmed.loss > 0
    assert list(model.parameters()) == params
    assert [p.data_ptr() for p in params] == pointers
    assert all(torch.equal(p, v) for p, v in zip(params, values, strict=True))
    assert all(p.grad is None for p in params)
    assert optimizer.state == {}
    assert "confirmed by one real step on" in fit.summary


@pytest.mark.slow
def test_checkpointing_named_blocks_of_a_plain_module() -> None:
    model = MLP()
    x = torch.randn(4, 32)
    plain = model(x)
    fit = autofit(model, x, 8, device="h100", checkpointing=True, checkpoint_modules="blocks.[0-9]")
    assert fit.checkpointed == ("blocks.0", "blocks.1", "blocks.2")
    assert fit.spec.checkpoint_modules == "blocks.[0-9]"
    wrapped = [
        n for n, m in model.named_modules() if CHECKPOINT_MARK in dir(vars(m).get("forward"))
    ]
    assert wrapped == ["blocks.0", "blocks.1", "blocks.2"]
    out = model(x)
    assert torch.allclose(out, plain)
    out.sum().backward()
    assert model.stem.weight.grad is not None
    unwrapped = fit.replan(checkpointing=False, checkpoint_modules=None)
    assert unwrapped.checkpointed == () and not unwrapped.checkpointing
    assert all("forward" not in vars(m) for m in model.modules())


def test_checkpointing_defaults_to_the_largest_module_list() -> None:
    model = MLP()
    fit = autofit(model, mlp_sample(), 8, loss_fn=F.cross_entropy, checkpointing=True)
    assert fit.checkpointed == ("blocks.0", "blocks.1", "blocks.2")
    assert fit.spec.checkpointing and fit.spec.checkpoint_modules is None
    with pytest.raises(SpecError, match=r"has no nn.ModuleList .*checkpoint_modules="):
        autofit(nn.Sequential(nn.Linear(32, 4)), torch.randn(2, 32), 8, checkpointing=True)


@pytest.mark.slow
def test_transformers_checkpointing_on_a_gpt2() -> None:
    model = tiny_gpt2()
    fit = autofit(model, gpt2_sample(), 16, device="h100", checkpointing=True)
    assert model.is_gradient_checkpointing
    assert fit.checkpointed == (
        "transformers' gradient checkpointing (each decoder/encoder layer)",
    )
    assert model.config.use_cache is False
    again = fit.replan(checkpointing=False)
    assert not model.is_gradient_checkpointing and not again.checkpointing


# --- stages ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_stage_switch_replans_with_everything_trainable() -> None:
    model = tiny_gpt2()
    frozen = autofit(
        model, gpt2_sample(), 32, device="rtx-4060", freeze=["transformer.h.*"], checkpointing=False
    )
    assert all(not p.requires_grad for p in model.transformer.h.parameters())
    assert model.transformer.wte.weight.requires_grad
    everything = frozen.replan(freeze=())
    assert all(p.requires_grad for p in model.parameters())
    assert frozen.trainable_parameters < everything.trainable_parameters == everything.parameters
    assert everything.predicted_bytes > frozen.predicted_bytes
    assert (everything.micro_batch, everything.grad_accum) == (32, 1)
    assert "of 112.4 k parameters trained" in frozen.summary
    back = everything.replan(freeze=["transformer.h.*"])
    assert back.trainable_parameters == frozen.trainable_parameters


# --- the loop's helpers ----------------------------------------------------------------------


def test_split_gives_the_micro_batches_of_a_step() -> None:
    fit = autofit(MLP(), mlp_sample(), 12, loss_fn=F.cross_entropy, micro_batch=4)
    assert isinstance(fit, Fit) and (fit.micro_batch, fit.grad_accum) == (4, 3)
    x, y = mlp_sample(12)
    parts = list(fit.split((x, y)))
    assert [tuple(p[0].shape) for p in parts] == [(4, 32)] * 3
    assert torch.equal(torch.cat([p[1] for p in parts]), y)
    parts = list(fit.split({"x": x, "flag": True}))
    assert [p["x"].shape[0] for p in parts] == [4, 4, 4] and parts[0]["flag"] is True
    optimizer = fit.make_optimizer(lr=0.01)
    assert isinstance(optimizer, torch.optim.AdamW) and optimizer.defaults["lr"] == 0.01
    with fit.autocast():
        pass


# --- bad input: one line each ----------------------------------------------------------------


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


# --- the docs and the example ------------------------------------------------------------


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


# --- review fixes -------------------------------------------------------------------------


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


class Named(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(32)
        self.body = nn.Sequential(nn.Linear(32, 32), nn.Dropout(0.5))

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
        return self.body(self.norm(x)).pow(2).mean()


@pytest.mark.slow
def test_confirm_restores_each_modules_mode_and_takes_mappings_and_namedtuples() -> None:
    import collections

    model = Named()
    model.train()
    model.norm.eval()
    x = torch.randn(4, 32)
    autofit(model, x, 8, device="cpu", confirm=True)
    assert model.training and not model.norm.training and model.body.training

    class Encoding(collections.UserDict):  # NB: transformers' BatchEncoding is a UserDict
        pass

    assert autofit(Named(), Encoding(x=x), 8, device="cpu", confirm=True).confirmed
    Pair = collections.namedtuple("Pair", "x y")
    fit = autofit(Named(), Pair(x, x), 8, device="cpu", micro_batch=4, confirm=True)
    assert fit.confirmed is not None
    parts = list(fit.split(Pair(torch.randn(8, 32), torch.randn(8, 32))))
    assert [type(p).__name__ for p in parts] == ["Pair", "Pair"] and parts[1].x.shape[0] == 4


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


def test_split_refuses_a_batch_of_other_rows() -> None:
    fit = autofit(MLP(), mlp_sample(), 8, loss_fn=F.cross_entropy, micro_batch=4, device="cpu")
    assert len(list(fit.split(mlp_sample(8)))) == fit.grad_accum == 2
    with pytest.raises(SpecError, match=r"effective_batch=8 rows \(4 x 2\), got 20 rows"):
        list(fit.split(mlp_sample(20)))


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
def test_a_tied_weight_is_frozen_by_either_name() -> None:
    model = tiny_gpt2()
    fit = autofit(model, gpt2_sample(), 4, device="cpu", freeze=["lm_head.*"])
    assert not model.transformer.wte.weight.requires_grad
    assert fit.trainable_parameters == fit.parameters - 128 * 64


def test_example_refuses_a_zero_effective_batch() -> None:
    pytest.importorskip("transformers")
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import train_autofit
    finally:
        sys.path.remove(str(ROOT / "examples"))
    with pytest.raises(SystemExit):
        train_autofit.main(["--device", "cpu", "--effective-batch", "0"])
