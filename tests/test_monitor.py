"""The training monitor: sources, sinks, phase hooks, the OOM report and the adapters (CPU)."""

from __future__ import annotations

import csv
import dataclasses
import importlib
import io
import itertools
import sys
import time
import types

import pytest
import torch
from torch import nn

from trainfit.errors import SpecError, TrainfitError
from trainfit.measure.backend import is_out_of_memory as is_oom
from trainfit.monitor import (
    FakeGpu,
    FakeMemory,
    GpuReading,
    MemoryReading,
    Monitor,
    NvmlSource,
    Sample,
    StepPhase,
)
from trainfit.monitor.notes import (
    CounterOff,
    CsvColumnsDropped,
    NvmlFailed,
    NvmlMissing,
    NvmlNoMatch,
    SamplerStopped,
)
from trainfit.monitor.oom import Observed, RungChange, next_rung_observed
from trainfit.monitor.oom_words import monitor_note_text, move_text, oom_text, rung_text
from trainfit.monitor.sinks import CSV_COLUMNS, console_line
from trainfit.plan.options import Change
from trainfit.spec import Precision, TrainSpec

GiB = 1 << 30
OOM_TEXT = "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79 GiB"
SPEC = TrainSpec(model="gpt2", batch=8, seq_len=512)
"""fp32 GPT-2 on an H100: its next rung is bf16 mixed precision (two estimates, about 1 s)."""


def fake_memory() -> FakeMemory:
    return FakeMemory(
        readings=[
            MemoryReading(
                allocated_bytes=1 * GiB,
                reserved_bytes=2 * GiB,
                peak_allocated_bytes=GiB + GiB // 2,
                total_bytes=80 * GiB,
            )
        ]
    )


def fake_gpu() -> FakeGpu:
    return FakeGpu(
        readings=[
            GpuReading(
                utilization_percent=50.0,
                power_watts=300.0,
                temperature_c=60.0,
                memory_used_bytes=3 * GiB,
            )
        ]
    )


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x))


class Boom(nn.Module):
    """Raises out-of-memory in its forward (`forward_oom`) or its backward (`backward_oom`)."""

    def __init__(self) -> None:
        super().__init__()
        self.forward_oom = False
        self.backward_oom = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.forward_oom:
            raise torch.OutOfMemoryError(OOM_TEXT)
        return _BoomInBackward.apply(x, self.backward_oom)


class _BoomInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: object, x: torch.Tensor, fail: bool) -> torch.Tensor:
        ctx.fail = fail  # type: ignore[attr-defined]
        return x.clone()

    @staticmethod
    def backward(ctx: object, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        if ctx.fail:  # type: ignore[attr-defined]
            raise torch.OutOfMemoryError(OOM_TEXT)
        return grad, None


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.boom = Boom()
        self.head = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(self.boom(x))


def train(model: nn.Module, mon: Monitor | None, steps: int = 3) -> list[float]:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    if mon is not None:
        mon.attach(optimizer=optimizer)
    torch.manual_seed(1)
    losses = []
    for _ in range(steps):
        x = torch.randn(4, 8)
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
        if mon is not None:
            mon.step(loss=loss, lr=0.1)
    return losses


def quiet(**kwargs: object) -> Monitor:
    kwargs.setdefault("memory", fake_memory())
    kwargs.setdefault("gpu", fake_gpu())
    kwargs.setdefault("console", False)
    kwargs.setdefault("interval_s", 60.0)
    return Monitor(**kwargs)  # type: ignore[arg-type]


# -- samples and sinks -------------------------------------------------------------------------


def test_samples_from_fakes() -> None:
    memory = fake_memory()
    with quiet(memory=memory) as mon:
        train(Net(), mon, steps=3)
    first, _, third = mon.samples
    assert [s.step for s in mon.samples] == [1, 2, 3]
    assert first.allocated_bytes == GiB
    assert first.reserved_bytes == 2 * GiB
    assert first.peak_allocated_bytes == GiB + GiB // 2
    assert first.device_used_bytes == 3 * GiB
    assert (first.utilization_percent, first.power_watts, first.temperature_c) == (50, 300, 60)
    assert third.loss is not None and third.scalars == {"lr": 0.1}
    assert memory.resets == 4  # NB: once at the start, then at every record


def test_every_records_every_nth_step() -> None:
    with quiet(every=2) as mon:
        train(Net(), mon, steps=5)
    assert [s.step for s in mon.samples] == [2, 4]


def test_console_line_exact() -> None:
    sample = Sample(
        step=7,
        time=0.0,
        step_seconds=0.25,
        allocated_bytes=GiB,
        reserved_bytes=2 * GiB,
        peak_allocated_bytes=3 * GiB,
        device_used_bytes=None,
        utilization_percent=87.4,
        power_watts=312.2,
        temperature_c=61.0,
        loss=2.5,
        scalars={"lr": 0.001},
    )
    assert console_line(sample) == (
        "trainfit: step 7 | loss 2.5000 | 0.250 s/step | alloc 1.00 GiB | reserved 2.00 GiB | "
        "peak 3.00 GiB | util 87% | 312 W | 61 C | lr 0.001"
    )


def test_console_writes_only_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    with quiet() as mon:
        train(Net(), mon, steps=1)
    assert capsys.readouterr().err == ""
    with quiet(console=True) as mon:
        train(Net(), mon, steps=2)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" | ")[0] for line in lines] == ["trainfit: step 1", "trainfit: step 2"]
    assert "alloc 1.00 GiB | reserved 2.00 GiB | peak 1.50 GiB | device 3.00 GiB" in lines[0]
    stream = io.StringIO()
    with quiet(console=stream) as mon:
        train(Net(), mon, steps=1)
    assert stream.getvalue().startswith("trainfit: step 1 | loss ")


def test_real_cpu_loop_writes_csv_and_tensorboard(tmp_path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    path, logs = tmp_path / "run.csv", tmp_path / "tb"
    with Monitor(
        model=Net(), csv=str(path), tensorboard=str(logs), console=False, interval_s=0.05
    ) as mon:
        losses = train(mon.model, mon, steps=4)  # type: ignore[arg-type]
    rows = list(csv.reader(path.open()))
    assert tuple(rows[0]) == (*CSV_COLUMNS, "lr")
    assert len(rows) == 5
    table = [dict(zip(rows[0], row, strict=True)) for row in rows[1:]]
    assert [int(r["step"]) for r in table] == [1, 2, 3, 4]
    assert [float(r["loss"]) for r in table] == pytest.approx(losses)
    assert all(int(r["allocated_bytes"]) > 0 for r in table)  # NB: the CPU's resident set
    assert {r["reserved_bytes"] for r in table} == {""}  # NB: the CPU has no reserved figure
    assert all(float(r["lr"]) == 0.1 for r in table)
    events = EventAccumulator(str(logs))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/loss", "train/lr", "memory/allocated_GiB", "train/step_seconds"} <= tags
    assert "gpu/power_W" not in tags  # NB: no NVML on the CPU
    loss = events.Scalars("train/loss")
    assert [e.step for e in loss] == [1, 2, 3, 4]
    assert [e.value for e in loss] == pytest.approx(losses, rel=1e-6)


def test_missing_tensorboard_names_the_package(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    with (
        pytest.raises(TrainfitError, match=r"pip install tensorboard"),
        quiet(tensorboard=str(tmp_path)),
    ):
        pass


def test_bad_arguments_are_listed() -> None:
    with pytest.raises(SpecError, match=r"every must be a positive integer, got 0; interval_s"):
        Monitor(every=0, interval_s=-1)


# -- NVML --------------------------------------------------------------------------------------


class _Handle:
    pass


def fake_pynvml(power_fails: bool = False, init_fails: bool = False) -> types.SimpleNamespace:
    def power(handle: object) -> int:
        if power_fails:
            raise RuntimeError("Not Supported")
        return 250_000

    def init() -> None:
        if init_fails:
            raise RuntimeError("Driver Not Loaded")

    return types.SimpleNamespace(
        nvmlInit=init,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda i: _Handle(),
        nvmlDeviceGetCount=lambda: 1,
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=93),
        nvmlDeviceGetPowerUsage=power,
        nvmlDeviceGetTemperature=lambda h, kind: 71,
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(used=5 * GiB),
        NVML_TEMPERATURE_GPU=0,
    )


@pytest.fixture
def no_uuid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: types.SimpleNamespace())
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_nvml_never_reads_another_gpu(no_uuid: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # without a UUID, index 0 of the visible GPUs need not be NVML's index 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    source = NvmlSource(torch.device("cuda", 0), nvml=fake_pynvml())
    assert source.read() == GpuReading()
    assert source.notes == [NvmlNoMatch(device="cuda:0")]
    assert "CUDA_VISIBLE_DEVICES set the index would name another GPU" in monitor_note_text(
        source.notes[0]
    )


def test_nvml_reads_counters(no_uuid: None) -> None:
    source = NvmlSource(torch.device("cuda", 0), nvml=fake_pynvml())
    assert source.read() == GpuReading(
        utilization_percent=93.0, power_watts=250.0, temperature_c=71.0, memory_used_bytes=5 * GiB
    )
    assert source.notes == []


def test_nvml_failing_counter_is_none_with_one_note(no_uuid: None) -> None:
    source = NvmlSource(torch.device("cuda", 0), nvml=fake_pynvml(power_fails=True))
    assert source.read().power_watts is None
    assert source.read().temperature_c == 71.0
    assert source.notes == [CounterOff(counter="power", error="Not Supported")]
    assert monitor_note_text(source.notes[0]) == "NVML power unavailable (Not Supported)"


def test_nvml_failing_init_gives_nones(no_uuid: None) -> None:
    source = NvmlSource(torch.device("cuda", 0), nvml=fake_pynvml(init_fails=True))
    assert source.read() == GpuReading()
    assert source.notes == [NvmlFailed(error="Driver Not Loaded")]
    assert monitor_note_text(source.notes[0]) == (
        "NVML failed (Driver Not Loaded): no utilisation, power or temperature"
    )


def test_nvml_missing_is_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    source = NvmlSource(torch.device("cuda", 0))
    assert source.read() == GpuReading()
    assert source.notes == [NvmlMissing()]
    assert "pip install nvidia-ml-py" in monitor_note_text(source.notes[0])


def test_a_scalar_after_the_first_csv_record_is_a_note(tmp_path) -> None:
    stream = io.StringIO()
    with quiet(csv=str(tmp_path / "run.csv"), console=stream) as mon:
        mon.step(loss=1.0)
        mon.step(loss=1.0, lr=0.1, beta=0.9)
        mon.step(loss=1.0, lr=0.1)
    assert mon.notes == [CsvColumnsDropped(columns=("beta", "lr"))]
    assert stream.getvalue().splitlines()[2] == (
        "trainfit: note: CSV columns are fixed at the first record: beta, lr not written there"
    )


def test_a_failing_sampler_is_a_note_and_the_run_goes_on() -> None:
    class Failing(FakeGpu):
        def read(self) -> GpuReading:
            if self._next:  # NB: the first reading, in __enter__, succeeds; the thread's fails
                raise RuntimeError("counter gone")
            return super().read()

    with quiet(gpu=Failing(readings=[GpuReading()]), interval_s=0.01) as mon:
        deadline = time.monotonic() + 5
        while not mon.notes and time.monotonic() < deadline:
            time.sleep(0.01)
        mon.step(loss=1.0)
    assert mon.notes == [SamplerStopped(error="counter gone")]
    assert monitor_note_text(mon.notes[0]) == "the sampler thread stopped: counter gone"


def test_gpu_notes_reach_the_console() -> None:
    stream = io.StringIO()
    note = CounterOff(counter="power", error="x")
    with quiet(gpu=FakeGpu(readings=[GpuReading()], notes=[note]), console=stream) as mon:
        pass
    assert stream.getvalue() == "trainfit: note: NVML power unavailable (x)\n"
    assert mon.notes == [note]


# -- phase hooks -------------------------------------------------------------------------------


def test_hooks_do_not_change_results_and_are_removed() -> None:
    plain, watched = Net(), Net()
    with quiet(model=watched) as mon:
        assert watched.blocks[0].fc._forward_pre_hooks
        losses = train(watched, mon, steps=3)
    assert losses == train(plain, None, steps=3)
    for a, b in zip(plain.parameters(), watched.parameters(), strict=True):
        assert torch.equal(a, b)
    assert all(not m._forward_pre_hooks and not m._forward_hooks for m in watched.modules())


def test_hooks_keep_gradients() -> None:
    plain, watched = Net(), Net()
    x = torch.randn(4, 8)
    plain(x).sum().backward()
    with quiet(model=watched):
        watched(x).sum().backward()
    for a, b in zip(plain.parameters(), watched.parameters(), strict=True):
        assert torch.equal(a.grad, b.grad)


def test_phases_follow_the_step() -> None:
    model = Net()
    seen: list[tuple[StepPhase, str | None]] = []
    with quiet(model=model) as mon:
        tracker = mon.tracker
        model.head.register_forward_pre_hook(
            lambda m, a: seen.append((tracker.phase, tracker.module))
        )
        out = model(torch.randn(2, 8))
        seen.append((tracker.phase, tracker.module))
        out.sum().backward()
        seen.append((tracker.phase, tracker.module))
    assert seen == [
        (StepPhase.FORWARD, "head"),
        (StepPhase.LOSS, None),
        (StepPhase.DATA, None),  # NB: the end-of-backward callback ran
    ]


# -- out of memory -----------------------------------------------------------------------------


@pytest.mark.slow
def test_oom_in_forward_with_spec(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    model = Net()
    monitor = quiet(model=model, spec=SPEC, console=True, tensorboard=str(tmp_path))
    with pytest.raises(torch.OutOfMemoryError) as caught, monitor as mon:
        train(model, mon, steps=2)
        model.boom.forward_oom = True
        train(model, mon, steps=1)
    assert str(caught.value) == OOM_TEXT  # NB: propagated unchanged
    report = mon.oom
    assert report is not None
    assert (report.step, report.phase, report.module) == (3, StepPhase.FORWARD, "boom")
    assert report.module_type == "Boom"
    assert report.requested_bytes == 2 * GiB
    assert report.allocated_bytes == GiB and report.total_bytes == 80 * GiB
    rung = report.next_rung
    assert rung.change == RungChange(change=Change.MIXED_PRECISION, precision=Precision.BF16)
    assert move_text(rung.change) == "bf16 mixed precision"
    assert rung.spec == dataclasses.replace(SPEC, precision="bf16")
    assert rung.saved_bytes is not None and rung.saved_bytes > 0
    assert rung.fits is True
    text = oom_text(report)
    assert text.startswith(
        "Out of memory at step 3, in the forward pass, in module boom (Boom): asking for "
        "2.00 GiB, 1.00 GiB allocated, 2.00 GiB reserved, peak 1.50 GiB this step of 80.00 GiB. "
        "Next rung of the low-memory ladder: bf16 mixed precision, predicted "
    )
    assert text.endswith("which fits the NVIDIA H100 80GB SXM (HBM3).")
    assert capsys.readouterr().err.splitlines()[-1] == "trainfit: " + text
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    assert "trainfit/out_of_memory/text_summary" in events.Tags()["tensors"]


@pytest.mark.slow
def test_rung_that_does_not_fit_names_the_rungs_until_a_fit() -> None:
    from trainfit.monitor.oom import next_rung_for_spec

    rung = next_rung_for_spec(TrainSpec(model="gpt2", batch=256, seq_len=1024))
    assert (move_text(rung.change), rung.fits) == ("bf16 mixed precision", False)
    assert rung.then == (
        RungChange(
            change=Change.QUARTER_MICRO_BATCH, micro_batch=64, grad_accum=4, effective_batch=256
        ),
        RungChange(change=Change.CHECKPOINTING),
    )
    assert rung.then_needed_bytes is not None and rung.then_needed_bytes < 80 * GiB
    assert rung_text(rung).endswith(
        "which does not fit the NVIDIA H100 80GB SXM (HBM3); with micro-batch 64 with 4 "
        "accumulation steps (effective batch 256) and gradient checkpointing as well: predicted "
        f"{rung.then_needed_bytes / GiB:.2f} GiB, which fits."
    )


def test_oom_names_the_innermost_module_in_forward() -> None:
    model = Net()
    with pytest.raises(torch.OutOfMemoryError), quiet(model=model) as mon:
        model.blocks[1].fc.register_forward_pre_hook(_raise_oom)  # NB: after the monitor's
        model(torch.randn(2, 8))
    assert mon.oom is not None
    assert (mon.oom.phase, mon.oom.module, mon.oom.module_type) == (
        StepPhase.FORWARD,
        "blocks.1.fc",
        "Linear",
    )


def _raise_oom(module: nn.Module, args: object) -> None:
    raise torch.OutOfMemoryError(OOM_TEXT)


def test_oom_in_backward_without_spec() -> None:
    model = Net()
    model.boom.backward_oom = True
    with pytest.raises(torch.OutOfMemoryError), quiet(model=model) as mon:
        train(model, mon, steps=1)
    report = mon.oom
    assert report is not None
    assert (report.step, report.phase, report.module) == (1, StepPhase.BACKWARD, "boom")
    assert report.next_rung.needed_bytes is None
    assert oom_text(report).startswith(
        "Out of memory at step 1, in the backward pass, at module boom"
    )
    assert oom_text(report).endswith(
        "Next rung of the low-memory ladder: mixed precision: run the forward and the loss under "
        "torch.autocast with bfloat16 (float16 with a GradScaler on GPUs older than Ampere) "
        "(pass spec= to the monitor for predicted figures)."
    )


def test_oom_in_the_optimizer_step() -> None:
    model = Net()

    class Failing(torch.optim.SGD):
        def step(self, closure=None):  # type: ignore[no-untyped-def]
            raise RuntimeError("CUDA error: out of memory")

    optimizer = Failing(model.parameters(), lr=0.1)
    monitor = quiet(model=model, optimizer=optimizer)
    with pytest.raises(RuntimeError, match="out of memory"), monitor as mon:
        model(torch.randn(2, 8)).sum().backward()
        optimizer.step()
    assert mon.oom is not None
    assert (mon.oom.phase, mon.oom.module) == (StepPhase.OPTIMIZER, None)


def test_other_errors_are_not_reported_and_propagate() -> None:
    with pytest.raises(ValueError, match="bad batch"), quiet(model=Net()) as mon:
        raise ValueError("bad batch")
    assert mon.oom is None
    assert not is_oom(ValueError("out of memory"))
    assert is_oom(RuntimeError("MPS backend out of memory (MPS allocated: 1 GB)"))


def test_keyboard_interrupt_stops_cleanly(tmp_path) -> None:
    path = tmp_path / "run.csv"
    model = Net()
    with pytest.raises(KeyboardInterrupt), quiet(model=model, csv=str(path)) as mon:
        train(model, mon, steps=2)
        raise KeyboardInterrupt
    assert mon._thread is None
    assert len(path.read_text().splitlines()) == 3  # NB: header and both rows kept
    assert all(not m._forward_pre_hooks for m in model.modules())


@pytest.mark.parametrize(
    ("seen", "change"),
    [
        (Observed(), "mixed precision: run the forward"),
        (Observed(autocast=True, micro_batch=8, accumulation=1), "micro-batch 2 with 4"),
        (Observed(autocast=True, micro_batch=2, accumulation=4), "gradient checkpointing"),
        (
            Observed(
                autocast=True, micro_batch=2, accumulation=4, checkpointing=True, optimizer="AdamW"
            ),
            "8-bit AdamW state (bitsandbytes.optim.AdamW8bit instead of AdamW)",
        ),
        (
            Observed(
                autocast=True, micro_batch=2, accumulation=4, checkpointing=True, optimizer="SGD"
            ),
            "micro-batch 1 with accumulation",
        ),
        (
            Observed(autocast=True, micro_batch=1, checkpointing=True, optimizer="SGD"),
            "every rung of the ladder is taken",
        ),
    ],
)
def test_rung_without_spec(seen: Observed, change: str) -> None:
    assert move_text(next_rung_observed(seen).change).startswith(change)


def test_ladder_order_matches_the_planner() -> None:
    from trainfit.hardware.catalog import get_device
    from trainfit.monitor import oom
    from trainfit.plan.ladder import LADDER, ladder_steps

    spec = TrainSpec(model="gpt2", batch=8, seq_len=128)
    steps = ladder_steps(spec, 8, get_device("h100"))
    changed = []
    for before, after in itertools.pairwise(steps):
        fields = [
            f.name
            for f in dataclasses.fields(TrainSpec)
            if getattr(before.spec, f.name) != getattr(after.spec, f.name)
        ]
        changed.append(fields or (["batch"] if after.micro_batch != before.micro_batch else []))
    assert changed == [["precision"], ["batch"], ["checkpointing"], ["optimizer"], ["batch"]]
    assert [s.change for s in steps[1:]] == list(LADDER)
    assert (
        oom.RUNG_NAMES
        == tuple(c.value for c in LADDER)
        == (
            "mixed precision",
            "quarter micro-batch",
            "gradient checkpointing",
            "8-bit AdamW",
            "micro-batch 1",
        )
    )


# -- adapters ----------------------------------------------------------------------------------


def test_lightning_callback_counts_optimizer_steps(tmp_path) -> None:
    import lightning.pytorch as pl

    from trainfit.monitor import TrainfitCallback

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = Net()

        def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
            return self.net(batch[0]).pow(2).mean()

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    data = torch.utils.data.TensorDataset(torch.randn(16, 8))
    callback = TrainfitCallback(console=False, csv=str(tmp_path / "pl.csv"))
    trainer = pl.Trainer(
        accelerator="cpu",
        max_epochs=1,
        accumulate_grad_batches=2,
        callbacks=[callback],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
    )
    trainer.fit(Module(), torch.utils.data.DataLoader(data, batch_size=2))
    assert [s.step for s in callback.samples] == [1, 2, 3, 4]  # NB: 8 batches, 2 per step
    assert all(s.loss is not None for s in callback.samples)
    assert len((tmp_path / "pl.csv").read_text().splitlines()) == 5


def test_lightning_callback_reports_oom(tmp_path) -> None:
    import lightning.pytorch as pl

    from trainfit.monitor import TrainfitCallback

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = Net()

        def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
            self.net.boom.forward_oom = batch_idx == 2
            return self.net(batch[0]).pow(2).mean()

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    data = torch.utils.data.TensorDataset(torch.randn(16, 8))
    callback = TrainfitCallback(console=False)
    trainer = pl.Trainer(
        accelerator="cpu",
        max_epochs=1,
        callbacks=[callback],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
    )
    with pytest.raises(torch.OutOfMemoryError):
        trainer.fit(Module(), torch.utils.data.DataLoader(data, batch_size=2))
    assert callback.oom is not None
    assert (callback.oom.step, callback.oom.phase, callback.oom.module) == (
        3,
        StepPhase.FORWARD,
        "net.boom",
    )


@pytest.mark.slow
def test_hf_trainer_callback(tmp_path) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    from trainfit.monitor import TrainfitTrainerCallback

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64))
    ids = torch.randint(0, 64, (12, 16))
    data = [{"input_ids": row, "labels": row} for row in ids]
    callback = TrainfitTrainerCallback(console=False, csv=str(tmp_path / "hf.csv"))
    args = TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=3,
        per_device_train_batch_size=2,
        gradient_accumulation_steps=2,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[callback])
    with callback:
        trainer.train()
    assert [s.step for s in callback.samples] == [1, 2, 3]
    assert all(s.loss is not None and s.loss > 0 for s in callback.samples)
    assert callback.monitor.tracker.last_forwards == 2
    assert not any(m._forward_pre_hooks for m in model.modules())
    assert len((tmp_path / "hf.csv").read_text().splitlines()) == 4


def test_missing_lightning_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("lightning", "lightning.pytorch", "pytorch_lightning"):
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "trainfit.monitor.lightning", raising=False)
    with pytest.raises(TrainfitError, match=r"pip install lightning"):
        importlib.import_module("trainfit.monitor.lightning")
