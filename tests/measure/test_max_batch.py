"""`trainfit.measure.max_batch`: the largest-micro-batch search, its out-of-memory recovery and
rank agreement, each attempt told as it starts (the progress protocol), a live module's copy
searched with its weights."""

from __future__ import annotations

import gc
import os
import socket

import pytest
import torch
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn

from tests import measure_models
from tests.measure.fakes import BROKEN, FakeCuda, GiB
from tests.measure_models import CAPPED
from trainfit.errors import MeasureError, SpecError
from trainfit.measure.backend import CpuBackend
from trainfit.measure.latency import measure_latency
from trainfit.measure.max_batch import Attempt, EvalShort, PastRam, _search, find_max_batch
from trainfit.measure.steps import measure
from trainfit.progress import Activity, Part, reporting
from trainfit.spec import TrainSpec


def _probe(largest: int):
    def probe(micro: int, eval_batch: int | None) -> Attempt:
        fits = micro <= largest
        return Attempt(micro_batch=micro, eval_batch=eval_batch, fits=fits, eval_fits=None,
                       failed_phase=None if fits else "backward", failure=None,
                       peak_reserved_bytes=None, peak_used_bytes=None,
                       left_allocated_bytes=None, seconds=0.0)  # fmt: skip

    return probe


def test_each_attempt_is_told_with_its_micro_batch() -> None:
    spec = TrainSpec(model="tests.measure_models:capped_mlp", inputs=("x=B,16:float32",),
                     device="cpu", batch=1)  # fmt: skip
    told = []
    with reporting(told.append):
        found = find_max_batch(spec, device="cpu", probe=_probe(5), limit=64, evaluate=False)
    tried = [e.batch for e in told if e.part is Part.MEASURE]
    assert {e.name for e in told} == {Activity.ATTEMPT.value}
    assert tried == [a.micro_batch for a in found.attempts] and found.micro_batch == 5


def test_a_live_module_is_searched_on_a_copy_with_its_weights() -> None:

    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    weight = net[0].weight.detach().clone()
    seen: list[nn.Module] = []

    def step(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        seen.append(model)
        return F.cross_entropy(model(batch[0]), batch[1])

    sample = (torch.randn(4, 8), torch.randint(0, 3, (4,)))
    found = find_max_batch(
        model=net, sample=sample, step_fn=step, device="cpu", limit=8, steps=1, evaluate=False
    )
    assert found.micro_batch == 8 and found.first_failing is None
    trained = seen[0]
    assert trained is not net and trained[0].weight.device.type == "cpu"
    assert not torch.equal(trained[0].weight, weight)  # NB: the copy took optimizer steps...
    assert torch.equal(net[0].weight, weight) and net[0].weight.grad is None  # NB: ...not net


def test_a_live_module_needs_its_sample_and_a_spec_is_a_trainspec() -> None:

    with pytest.raises(SpecError, match=r"^model is a live Linear: give its batch too, e.g. "
                       r"find_max_batch\(model=module"):  # fmt: skip
        find_max_batch(model=nn.Linear(4, 2), device="cpu")
    with pytest.raises(SpecError, match=r"^model is a live Linear: give its batch too"):
        find_max_batch(nn.Linear(4, 2), device="cpu")  # type: ignore[arg-type]  # NB: the model
    with pytest.raises(SpecError, match=r"^find_max_batch: spec must be a TrainSpec, got str"):
        find_max_batch("gpt2", device="cpu")  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="give either a TrainSpec or keyword arguments"):
        find_max_batch(TrainSpec(model="gpt2"), sample=torch.randn(2, 4))


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
        _leave()


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
        _leave()


def _leave() -> None:
    """Leave the process group once every rank is done with it, so that no rank's teardown
    races a peer still using the group (one CI run saw a rank abort with "terminate called
    without an active exception"; the cause was not found)."""
    torch.distributed.barrier()
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
