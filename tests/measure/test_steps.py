"""trainfit.measure on the CPU: real steps, the comparison, the max-batch search with its
out-of-memory recovery and rank agreement, latency, and the `trainfit measure` command.

CUDA is faked behind `trainfit.measure.backend.Backend` (the real CUDA path runs on the GPU
machine: benchmarks/measure/)."""

from __future__ import annotations

import gc
import json
import os
import socket

import pytest
import torch
import torch.multiprocessing as mp

from tests import measure_models
from tests.measure_models import CAPPED
from trainfit.cli.main import main
from trainfit.errors import MeasureError
from trainfit.estimator.step import estimate
from trainfit.hardware.catalog import DeviceKind
from trainfit.measure.backend import CpuBackend, backend_for, is_out_of_memory
from trainfit.measure.compare import compare
from trainfit.measure.latency import measure_latency
from trainfit.measure.max_batch import Attempt, EvalShort, PastRam, _search, find_max_batch
from trainfit.measure.steps import measure
from trainfit.spec import TrainSpec

GiB = 1 << 30
BROKEN = dict(
    model="tests.measure_models:broken_mlp", inputs=("x=B,16:float32",), device="cpu", batch=4
)


class FakeCuda(CpuBackend):
    """A CUDA card as the backend interface shows it: the steps run on the CPU, the memory
    counters are scripted (allocated grows by `per_phase` at every reading)."""

    kind = DeviceKind.CUDA

    def __init__(self, total: int = 80 * GiB, free: int = 79 * GiB, context: int = GiB // 2):
        super().__init__()
        self.total, self.free, self.context = total, free, context
        self.reads = 0

    def name(self) -> str:
        return "Fake H100"

    def allocated(self) -> int | None:
        return 100 * (1 << 20) + self.reads * (1 << 20)

    def reserved(self) -> int | None:
        return 2 * GiB

    def take_peaks(self) -> tuple[int | None, int | None, int | None]:
        self.reads += 1
        return self.allocated(), 2 * GiB, 2 * GiB + self.context

    def total_memory(self) -> int | None:
        return self.total

    def free_memory(self) -> int | None:
        return self.free


# ---------------------------------------------------------------------------------------------
# measure()


@pytest.mark.slow
def test_measure_runs_real_cpu_steps_and_counts_the_model_states():
    spec = TrainSpec(**CAPPED)
    m = measure(spec, steps=3, warmup=1, device="cpu")
    params = (16 * 32 + 32 + 32 * 4 + 4) * 4
    assert (m.kind, m.steps, m.warmup, m.interrupted) == ("cpu", 3, 1, False)
    assert m.parameter_bytes == params
    assert m.gradient_bytes == params
    assert m.optimizer_state_bytes >= 2 * params  # AdamW: exp_avg and exp_avg_sq (+ steps)
    assert m.peak_allocated_bytes is None and m.activation_bytes is None  # no CPU counters
    assert len(m.step_seconds) == 3 and all(s > 0 for s in m.step_seconds)
    assert m.samples_per_second == pytest.approx(4 / m.loop_step_seconds)
    assert m.device_needed_bytes == m.peak_used_bytes >= 0
    # every phase of every step (1 warm-up + 3 timed) was read
    assert [p.phase.value for p in m.phases[:3]] == ["forward", "backward", "optimizer"]
    assert len(m.phases) == 4 * 3
    assert json.loads(json.dumps(m.to_dict()))["steps"] == 3


@pytest.mark.slow
def test_measure_with_cuda_counters_gives_needed_as_reserved_plus_context():
    spec = TrainSpec(**CAPPED)
    fake = FakeCuda(context=600 << 20)
    m = measure(spec, steps=2, warmup=1, backend=fake, loop_steps=0)  # the phases hold the peaks
    assert m.peak_reserved_bytes == 2 * GiB
    # peak reserved + what the process holds outside the allocator (used - reserved at the end)
    assert m.device_needed_bytes == 2 * GiB + (600 << 20)
    assert m.peak_allocated_bytes == max(p.peak_allocated_bytes for p in m.phases)
    assert m.activation_bytes == 1 << 20  # one counter step between forward and backward
    assert m.free_at_start_bytes == 79 * GiB


def test_a_model_failing_its_own_forward_is_one_line_naming_the_module():
    with pytest.raises(MeasureError) as info:
        measure(TrainSpec(**BROKEN), steps=2, warmup=1, device="cpu")
    text = str(info.value)
    assert text.startswith("the model failed its own forward pass at step 1 (in module second)")
    assert "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x32 and 33x4)" in text
    assert "\n" not in text
    # raised outside the handler: no context keeps the failed step's frames alive
    assert info.value.__cause__ is None and info.value.__context__ is None


def test_a_model_calling_sys_exit_is_one_line_not_an_exit():
    spec = TrainSpec(**{**BROKEN, "model": "tests.measure_models:exiting_mlp"})
    with pytest.raises(MeasureError, match=r"forward pass at step 1 .*: SystemExit: 5 \(at "):
        measure(spec, steps=2, warmup=1, device="cpu")


def test_out_of_memory_names_the_phase_the_batch_and_what_was_free():
    measure_models.LIMITS["train"] = 2
    with pytest.raises(
        MeasureError,
        match=r"^out of memory on Fake H100 in the forward pass of "
        r"step 1 \(in module <model>\) at micro-batch 4; 79.00 GiB was free of "
        r"80.00 GiB at the start; find what fits with `trainfit measure "
        r"--max-batch` or `trainfit plan`$",
    ):
        measure(TrainSpec(**CAPPED), steps=2, warmup=1, backend=FakeCuda())


@pytest.mark.slow
def test_ctrl_c_during_timed_steps_keeps_what_was_measured():
    # 1 warm-up + 2 timed steps complete, the 4th forward is interrupted
    measure_models.LIMITS["interrupt_after"] = 3
    m = measure(TrainSpec(**CAPPED), steps=10, warmup=1, device="cpu")
    assert m.interrupted and m.steps == 2 and len(m.step_seconds) == 2
    assert m.parameter_bytes > 0


@pytest.mark.slow
def test_ctrl_c_in_the_first_step_is_not_swallowed():
    measure_models.LIMITS["interrupt_after"] = 0
    with pytest.raises(KeyboardInterrupt):
        measure(TrainSpec(**CAPPED), steps=2, warmup=1, device="cpu")


def test_bad_counts_and_devices_are_one_line_errors():
    with pytest.raises(MeasureError, match=r"at least 1 timed step .* got steps=0, warmup=1"):
        measure(TrainSpec(**CAPPED), steps=0, warmup=1, device="cpu")
    with pytest.raises(MeasureError, match=r"phase times are read from CUDA events; .* has none"):
        measure(TrainSpec(**CAPPED), steps=1, warmup=0, device="cpu", phase_times=True)
    with pytest.raises(MeasureError, match=r"unknown local device 'tpu:0': use cuda, cuda:N"):
        backend_for("tpu:0")
    if not torch.cuda.is_available():
        with pytest.raises(MeasureError, match=r"^no CUDA GPU is visible here .* --on cpu$"):
            backend_for("cuda")


def test_out_of_memory_is_told_from_other_errors():
    assert is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory"))
    assert is_out_of_memory(RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling"))
    assert is_out_of_memory(MemoryError())
    assert not is_out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    assert not is_out_of_memory(ValueError("out of memory"))


# ---------------------------------------------------------------------------------------------
# compare()


@pytest.mark.slow
def test_compare_lines_up_estimate_and_measurement_with_the_error():
    spec = TrainSpec(**CAPPED)
    result = estimate(spec)
    m = measure(spec, steps=2, warmup=1, device="cpu")
    comparison = compare(result, m)
    row = comparison.row("device memory needed")
    assert row.estimated == result.device_memory_needed_bytes
    assert row.measured == m.device_needed_bytes
    if m.device_needed_bytes:
        assert row.error == pytest.approx(row.estimated / row.measured - 1)
    assert comparison.row("step time (loop)").measured == m.loop_step_seconds
    with pytest.raises(KeyError):
        comparison.row("peak allocated")  # no allocator counters on the CPU


def test_compare_on_a_gpu_adds_allocator_rows_and_component_totals():
    spec = TrainSpec(**{**CAPPED, "device": "h100"})
    result = estimate(spec)
    m = measure(spec, steps=2, warmup=1, backend=FakeCuda())
    totals = {"parameters": 1, "gradients": 2, "optimizer_state": 3, "activations": 4}
    comparison = compare(result, m, totals)
    quantities = [r.quantity for r in comparison.rows]
    assert quantities[:3] == ["device memory needed", "peak allocated", "peak reserved"]
    assert comparison.row("optimizer state").estimated == 3
    assert comparison.row("activations kept by the forward").measured == m.activation_bytes
    assert comparison.row("peak reserved").error == pytest.approx(
        result.peak_reserved_bytes / (2 * GiB) - 1
    )


# ---------------------------------------------------------------------------------------------
# the max-batch search


@pytest.mark.parametrize("start", [1, 2, 7, 40, 41, 60, 300])
@pytest.mark.parametrize("largest", [0, 1, 40, 41, 257])
def test_search_finds_the_same_answer_as_trying_every_batch(start, largest):
    seen: list[int] = []

    def fits(b: int) -> bool:
        seen.append(b)
        return b <= largest

    low, high = _search(fits, start, 1000)
    assert low == largest
    assert high == (largest + 1 if largest < 1000 else None)
    assert len(seen) == len(set(seen))  # never tries one batch twice
    assert len(seen) <= 25


def _scripted(train_cap: int, eval_cap: int, calls: list[tuple[int, int | None]]):
    def probe(micro: int, eval_batch: int | None) -> Attempt:
        calls.append((micro, eval_batch))
        fits = micro <= train_cap
        return Attempt(
            micro_batch=micro,
            eval_batch=eval_batch,
            fits=fits,
            eval_fits=None if not fits or eval_batch is None else eval_batch <= eval_cap,
            failed_phase=None if fits else "backward",
            failure=None,
            peak_reserved_bytes=None,
            peak_used_bytes=None,
            left_allocated_bytes=None,
            seconds=0.0,
        )

    return probe


def test_an_evaluation_out_of_memory_does_not_lower_the_training_maximum():
    calls: list[tuple[int, int | None]] = []
    found = find_max_batch(
        TrainSpec(**CAPPED), probe=_scripted(37, 30, calls), start=20, device="cpu"
    )
    assert found.micro_batch == 37 and found.first_failing == 38
    assert found.max_eval_batch == 30
    assert found.notes[0] == EvalShort(eval_batch=37, trained=37, largest=30)
    # the evaluation search trains at the maximum each time
    assert all(micro == 37 for micro, _ in calls[-4:])


@pytest.mark.slow
def test_the_effective_batch_is_kept_with_the_largest_dividing_micro_batch():
    found = find_max_batch(
        TrainSpec(**CAPPED),
        probe=_scripted(37, 1000, []),
        effective_batch=96,
        evaluate=False,
        device="cpu",
    )
    assert found.micro_batch == 37
    assert (found.chosen_micro_batch, found.grad_accum) == (32, 3)
    assert found.max_eval_batch is None
    found = find_max_batch(
        TrainSpec(**CAPPED), probe=_scripted(500, 1000, []), effective_batch=64, device="cpu"
    )
    assert (found.micro_batch, found.first_failing, found.limit) == (64, None, 64)
    assert (found.chosen_micro_batch, found.grad_accum) == (64, 1)


def test_max_batch_bad_input_lists_every_problem():
    with pytest.raises(
        MeasureError,
        match=r"steps must be at least 1, got 0; limit must be at "
        r"least 1, got 0; the evaluation batch must be at least 1, got -1",
    ):
        find_max_batch(TrainSpec(**CAPPED), steps=0, limit=0, eval_batch=-1, device="cpu")


@pytest.mark.slow
def test_real_attempts_recover_from_out_of_memory_and_leave_nothing_behind():
    measure_models.LIMITS.update(train=13, eval=9)
    found = find_max_batch(TrainSpec(**CAPPED), start=4, steps=2, device="cpu")
    assert (found.micro_batch, found.first_failing, found.max_eval_batch) == (13, 14, 9)
    failed = [a for a in found.attempts if not a.fits]
    assert failed and all(a.failed_phase == "forward" for a in failed)
    assert failed[0].failure.out_of_memory and "CUDA out of memory" in failed[0].failure.line
    gc.collect()
    assert not [o for o in gc.get_objects() if torch.optim.Optimizer in type(o).__mro__]


@pytest.mark.slow
def test_an_attempt_past_the_free_ram_fails_before_the_kernel_kills_the_run():
    class Swelling(CpuBackend):
        def free_memory(self) -> int | None:
            return 10 * GiB

        def take_peaks(self) -> tuple[int | None, int | None, int | None]:
            return None, None, self.batch * GiB  # NB: grows with the batch tried

    backend = Swelling()
    backend.batch = 0
    real_probe = find_max_batch.__globals__["_Prober"]

    class Watching(real_probe):
        def __call__(self, micro: int, eval_batch: int | None) -> Attempt:
            backend.batch = micro
            return super().__call__(micro, eval_batch)

    prober = Watching(TrainSpec(**CAPPED), backend, 1, ram_budget=10 * GiB)
    found = find_max_batch(TrainSpec(**CAPPED), start=4, backend=backend, probe=prober)
    assert (found.micro_batch, found.first_failing) == (10, 11)
    failed = next(a for a in found.attempts if a.micro_batch == 11)
    assert failed.failed_phase == "host memory"
    assert failed.failure == PastRam(grew_bytes=11 * GiB, available_bytes=10 * GiB)


@pytest.mark.slow
def test_weights_that_do_not_fit_are_one_line_in_every_mode():
    spec = TrainSpec(model="tests.measure_models:too_big", inputs=("x=B,16:float32",), device="cpu")
    expected = "while moving the model to the device"
    with pytest.raises(MeasureError, match=expected) as info:
        measure(spec, steps=1, warmup=1, backend=FakeCuda())
    assert "300" not in str(info.value) and info.value.__context__ is None
    with pytest.raises(MeasureError, match=expected):
        measure_latency(spec, runs=2, warmup=1, device="cpu")
    with pytest.raises(MeasureError, match=expected):
        find_max_batch(spec, device="cpu")


def test_an_interrupted_search_reports_its_bounds(capsys):
    from rich.console import Console

    from trainfit.report.measure import max_batch_renderable

    calls: list[tuple[int, int | None]] = []
    scripted = _scripted(40, 40, calls)

    def probe(micro: int, eval_batch: int | None) -> Attempt:
        if len(calls) == 3:
            raise KeyboardInterrupt
        return scripted(micro, eval_batch)

    found = find_max_batch(TrainSpec(**CAPPED), probe=probe, start=20, device="cpu")
    assert found.interrupted and (found.micro_batch, found.first_failing) == (23, None)
    console = Console(width=100, record=True)
    console.print(max_batch_renderable(found))
    assert "interrupted: at least 23 fits" in console.export_text()


@pytest.mark.slow
def test_real_attempts_stop_on_an_error_that_is_not_out_of_memory():
    with pytest.raises(
        MeasureError,
        match=r"^the model failed its own forward pass \(in module second\) while "
        r"searching for the largest micro-batch: RuntimeError: mat1 and mat2",
    ):
        find_max_batch(TrainSpec(**BROKEN), device="cpu")


def _rank(rank: int, port: int, caps: list[int], results) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=len(caps))
    try:
        found = find_max_batch(
            TrainSpec(**CAPPED),
            probe=_scripted(caps[rank], caps[rank], []),
            start=10,
            effective_batch=64,
            device="cpu",
        )
        results[rank] = (
            found.micro_batch,
            found.chosen_micro_batch,
            found.grad_accum,
            found.world_size,
            len(found.attempts),
        )
    finally:
        torch.distributed.destroy_process_group()


def _failing_rank(rank: int, port: int, results) -> None:
    import datetime

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    measure_models.LIMITS["fail_rank"] = 1
    torch.distributed.init_process_group(
        "gloo", rank=rank, world_size=2, timeout=datetime.timedelta(seconds=60)
    )
    try:
        find_max_batch(TrainSpec(**CAPPED), start=2, limit=8, device="cpu")
        results[rank] = "no error"
    except MeasureError as exc:
        results[rank] = str(exc)
    finally:
        torch.distributed.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_an_error_on_one_rank_stops_every_rank_with_one_line():
    results = mp.Manager().dict()
    mp.spawn(_failing_rank, args=(_free_port(), results), nprocs=2, join=True)
    assert results[1] == (
        "the model failed its own forward pass (in module <model>) while searching for the "
        "largest micro-batch: ValueError: a bug on one rank only"
    )
    assert results[0] == "another rank failed: see its error"


@pytest.mark.slow
def test_ranks_agree_on_the_largest_micro_batch():
    results = mp.Manager().dict()
    mp.spawn(_rank, args=(_free_port(), [23, 17], results), nprocs=2, join=True)
    # rank 1 runs out above 17: both answer 17, and 16 for 32 samples per rank
    assert results[0] == results[1]
    assert results[0][:4] == (17, 16, 2, 2)


# ---------------------------------------------------------------------------------------------
# latency


def test_latency_percentiles_per_batch():
    table = measure_latency(TrainSpec(**CAPPED), batches=(8, 1), warmup=2, runs=20, device="cpu")
    assert [r.batch for r in table.rows] == [1, 8]
    for row in table.rows:
        assert row.runs == 20 and len(row.seconds) == 20
        assert min(row.seconds) <= row.p50 <= row.p95 <= row.p99 <= max(row.seconds)
        assert row.samples_per_second == pytest.approx(row.batch / row.p50)
    data = table.to_dict()
    assert data["rows"][1]["p99_ms"] == pytest.approx(table.rows[1].p99 * 1e3)


def test_latency_bad_input():
    with pytest.raises(
        MeasureError,
        match=r"batch 0 is not a positive number; --runs must be "
        r"at least 2 for percentiles, got 1",
    ):
        measure_latency(TrainSpec(**CAPPED), batches=(1, 0), runs=1, device="cpu")


# ---------------------------------------------------------------------------------------------
# the command


def test_measure_command_json_and_out_file(tmp_path, capsys):
    out = tmp_path / "m.json"
    args = [
        "measure",
        CAPPED["model"],
        "--input",
        "x=B,16:float32",
        "--batch",
        "4",
        "--steps",
        "2",
        "--warmup",
        "1",
        "--on",
        "cpu",
        "--json",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(out.read_text())
    assert printed["measured"]["steps"] == 2 and printed["measured"]["loop_steps"] == 2
    assert printed["comparison"]["rows"][0]["quantity"] == "device memory needed"
    step = [r for r in printed["comparison"]["rows"] if r["quantity"] == "step time (loop)"]
    assert step[0]["measured"] == printed["measured"]["loop_step_seconds"]
    assert printed["estimate"]["device"] == "cpu"


@pytest.mark.slow
def test_measure_command_max_batch_and_latency_tables(capsys):
    measure_models.LIMITS.update(train=5, eval=5)
    base = ["measure", CAPPED["model"], "--input", "x=B,16:float32", "--on", "cpu"]
    assert main([*base, "--max-batch", "--effective-batch", "12", "--no-estimate"]) == 0
    text = capsys.readouterr().out
    assert "largest micro-batch 5 (6 ran out of memory)" in text
    assert "for an effective batch of 12: micro-batch 4 x 3 accumulation" in text
    assert main([*base, "--latency", "--latency-batch", "4", "--runs", "5", "--warmup", "1"]) == 0
    text = capsys.readouterr().out
    assert "inference latency on" in text and "p99 ms" in text


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--effective-batch", "8"],
            "--effective-batch only applies with --max-batch: add --max-batch, or drop it",
        ),
        (
            ["--runs", "5", "--latency-batch", "4"],
            "--latency-batch, --runs only apply with --latency",
        ),
        (["--limit", "64"], "--limit only applies with --max-batch"),
        (["--out", "no/such/folder/m.json"], "its folder "),
        (["--out", "."], "--out . is a directory: give the path of a .json file"),
        (["--max-batch", "--latency"], "choose one of --max-batch and --latency"),
        (["--steps", "0"], "--steps must be at least 1"),
        (["--warmup", "0"], "--warmup at least 1 (the first step creates the optimizer state)"),
        (["--on", "tpu"], "unknown local device 'tpu'"),
    ],
)
def test_measure_command_bad_input_is_one_line(extra, message, capsys):
    args = ["measure", CAPPED["model"], "--input", "x=B,16:float32", "--on", "cpu", *extra]
    if "--on" in extra:
        args = ["measure", CAPPED["model"], "--input", "x=B,16:float32", *extra]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith("trainfit: error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_measure_command_interrupted_prints_what_it_has_and_exits_130(capsys):
    measure_models.LIMITS["interrupt_after"] = 3
    args = [
        "measure",
        CAPPED["model"],
        "--input",
        "x=B,16:float32",
        "--on",
        "cpu",
        "--steps",
        "10",
        "--warmup",
        "1",
        "--no-estimate",
    ]
    assert main(args) == 130
    out = capsys.readouterr().out
    assert "1 warm-up + 2 timed steps (interrupted)" in out


@pytest.mark.slow
def test_busy_gpu_says_what_is_free_and_what_fits(monkeypatch):
    from trainfit.measure.room import check_room

    spec = TrainSpec(model="gpt2", batch=16, seq_len=1024, precision="bf16", device="h100")
    result = estimate(spec)
    busy = FakeCuda(total=80 * GiB, free=6 * GiB)
    with pytest.raises(MeasureError) as info:
        check_room(spec, busy, result)
    text = str(info.value)
    assert text.startswith(
        "Fake H100 has 6.00 GiB free of 80.00 GiB (other processes and this one's CUDA "
        "context hold 74.00 GiB) and this step needs about"
    )
    assert "fits in what is free (estimated): use --batch" in text
    assert text.endswith("free the GPU, or pass --force to try anyway")
    check_room(spec, FakeCuda(free=79 * GiB), result)  # room enough: no error


@pytest.fixture
def fake_torch_cuda(monkeypatch):
    """torch.cuda as a card with 10 GiB held by other processes; set_device adds this
    process's 0.5 GiB context."""
    state = {"used": 10 * GiB}
    patches = {
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "set_device": lambda d: state.update(used=state["used"] + GiB // 2),
        "mem_get_info": lambda d=None: (80 * GiB - state["used"], 80 * GiB),
        "reset_peak_memory_stats": lambda d=None: None,
        "max_memory_allocated": lambda d=None: GiB,
        "max_memory_reserved": lambda d=None: 2 * GiB,
        "synchronize": lambda d=None: None,
        "empty_cache": lambda: None,
    }
    for name, fn in patches.items():
        monkeypatch.setattr(torch.cuda, name, fn)
    return state


@pytest.mark.parametrize(
    ("process_listed", "device_figure", "expected", "method"),
    [
        (True, True, 2 * GiB + GiB // 2, "NVML: this process's memory"),
        (False, True, 2 * GiB + GiB // 2, "NVML does not list this process"),
        (False, False, 2 * GiB, "CUDA context (about 0.5 GiB) is NOT counted"),
    ],
)
def test_cuda_backend_counts_the_context_where_it_can(
    fake_torch_cuda, monkeypatch, process_listed, device_figure, expected, method
):
    import trainfit.measure.backend as backend_module

    state = fake_torch_cuda
    monkeypatch.setattr(
        backend_module.nvml,
        "process_bytes",
        lambda d: state["used"] - 10 * GiB if process_listed else None,
    )
    monkeypatch.setattr(
        backend_module.nvml,
        "device_used_bytes",
        lambda d: state["used"] if device_figure else None,
    )
    backend = backend_module.CudaBackend(torch.device("cuda"))
    backend.start()
    state["used"] += 2 * GiB  # the steps reserve 2 GiB
    allocated, reserved, used = backend.take_peaks()
    assert (allocated, reserved, used) == (GiB, 2 * GiB, expected)
    assert method in backend.used_method


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--max-batch", "--steps", "5"], "with --max-batch use --attempt-steps"),
        (["--latency", "--batch", "8"], "give the batch as --latency-batch"),
        (["--max-batch", "--effective-batch", "0"], "--effective-batch must be at least 1, got 0"),
        (["--device", "h100"], "--device h100 is a cuda device but the steps run on"),
    ],
)
def test_measure_command_refuses_flags_it_would_ignore(extra, message, capsys):
    args = ["measure", CAPPED["model"], "--input", "x=B,16:float32", "--on", "cpu", *extra]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.slow
def test_max_batch_keeps_the_batch_given_and_needs_no_gpu_prediction(capsys):
    measure_models.LIMITS.update(train=5, eval=5)
    args = [
        "measure",
        CAPPED["model"],
        "--input",
        "x=B,16:float32",
        "--on",
        "cpu",
        "--batch",
        "4",
        "--grad-accum",
        "3",
        "--max-batch",
        "--json",
    ]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["max_micro_batch"], out["micro_batch"], out["grad_accum"]) == (5, 4, 3)
    assert out["predicted"] is None
    assert (
        "keeping the effective batch of --batch 4 x --grad-accum 3 = 12" in out["command_notes"][0]
    )


def test_on_step_reports_every_step_as_it_completes():
    seen = []
    m = measure(TrainSpec(**CAPPED), steps=2, warmup=1, device="cpu", on_step=seen.append)
    assert [(d.index, d.total, d.warmup) for d in seen] == [(0, 3, True), (1, 3, False),
                                                           (2, 3, False)]  # fmt: skip
    # the timed steps' times are the ones measured
    assert tuple(d.seconds for d in seen[1:]) == m.step_seconds


def test_an_error_in_the_callback_is_raised_as_itself_not_as_the_models():
    def broken(done):
        raise KeyError("the caller's bug")

    with pytest.raises(KeyError, match="the caller's bug"):
        measure(TrainSpec(**CAPPED), steps=2, warmup=1, device="cpu", on_step=broken)


def test_measure_tells_the_build_and_each_step_before_it_runs():
    from trainfit.progress import Activity, Part, reporting

    told = []
    with reporting(told.append):
        measure(TrainSpec(**CAPPED), steps=2, warmup=1, device="cpu")
    mine = [(e.name, e.index, e.total) for e in told if e.part is Part.MEASURE]
    assert mine == [(Activity.BUILD.value, None, None), (Activity.WARMUP.value, 1, 3),
                    (Activity.STEP.value, 2, 3), (Activity.STEP.value, 3, 3),
                    (Activity.LOOP.value, None, 2)]  # fmt: skip


def test_a_live_module_s_steps_are_measured_on_a_copy_with_its_weights() -> None:
    from torch import nn

    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    weight = net[0].weight.detach().clone()
    sample = (torch.randn(4, 8), torch.randint(0, 3, (4,)))
    done = measure(
        model=net, sample=sample, loss=nn.functional.cross_entropy, device="cpu", steps=2,
        warmup=0, loop_steps=0,
    )  # fmt: skip
    assert done.micro_batch == 4 and len(done.step_seconds) == 2
    assert done.parameter_bytes == sum(p.numel() * 4 for p in net.parameters())
    assert torch.equal(net[0].weight, weight) and net[0].weight.grad is None
