"""The ladder's traces in a worker process, while the devices are planned in this one, and
then the multi-GPU plans of other kernel families, while this one makes its own."""

from __future__ import annotations

import dataclasses
import multiprocessing
from concurrent.futures import Future, ProcessPoolExecutor

from trainfit.distributed.search import DistributedPlan, SharedTraces, plan_distributed
from trainfit.errors import USER_CODE_ERRORS
from trainfit.estimator.step import gpu_memory
from trainfit.hardware.catalog import Device
from trainfit.plan.worker_start import start_worker
from trainfit.spec import OptimizerKind, TrainSpec
from trainfit.trace import store
from trainfit.trace.collector import collector_paused
from trainfit.trace.step import trace_step
from trainfit.trace.target import Target

WORKER_PARAMETERS = 1_000_000_000
"""Parameters from which the ladder is traced in a worker (a trace then takes over a second
on a laptop core, and the ladder's few traces outlast the worker's start-up)."""


class LadderWorker:
    """The ladder's steps (setting and micro-batch), each traced and replayed in one worker
    process, in order.

    NB: a fresh interpreter (spawn, the default on macOS and safe beside torch's threads)
    imports the model's code again; a step it cannot do (a model defined in `__main__`, a
    user catalog given on the command line) comes back as None and is done here instead.
    Ctrl-C (SIGINT, sent to the whole process group) is this process's to handle: the worker
    ignores it, and this process's KeyboardInterrupt ends the worker through `close()`.
    """

    def __init__(self, steps: list[tuple[TrainSpec, int]], device: Device) -> None:
        context = multiprocessing.get_context("spawn")
        self._pool = ProcessPoolExecutor(
            max_workers=1, mp_context=context, initializer=start_worker
        )
        self._futures = [
            self._pool.submit(
                _needed_in_worker, dataclasses.replace(s, batch=micro, device=device.name), device
            )
            for s, micro in _given(steps)
        ]

    def needed(self, index: int) -> int | None:
        """Device memory of step `index`, or None (not given to the worker, or failed)."""
        if index >= len(self._futures):
            return None
        try:
            return self._futures[index].result()
        except Exception:  # the step is done again in this process
            return None

    def search(self, arguments: tuple[object, ...]) -> Future[DistributedPlan | None]:
        """`plan_distributed(*arguments)` in the worker, after its ladder steps, with traces
        of its own (`SharedTraces`)."""
        return self._pool.submit(_searched_in_worker, arguments)

    def close(self) -> None:
        """Stop the worker, mid-trace or not, and wait until it has exited."""
        for future in self._futures:
            future.cancel()
        # NB: a step still being traced is not needed any more; the process is ended rather
        # than waited for (ProcessPoolExecutor has no public way before Python 3.14)
        for process in list(getattr(self._pool, "_processes", {}).values()):
            process.terminate()
        self._pool.shutdown(wait=True, cancel_futures=True)


def worth_starting(steps: list[tuple[TrainSpec, int]], device: Device) -> bool:
    """Whether a `LadderWorker` has work: not when the first step it would trace is kept on
    disk (`trainfit.trace.store`). The worker traces its steps in order and keeps them, so
    this ladder was planned before (a step of it traced then, here or in a worker, is kept);
    the steps its plan read from the worker then are kept, those it did not read are not
    needed now either, and any step not kept is traced here."""
    given = _given(steps)
    if not store.enabled() or not given:
        return bool(given)
    s, micro = given[0]
    return not _kept(dataclasses.replace(s, batch=micro, device=device.name), Target.of(device))


def _kept(spec: TrainSpec, target: Target) -> bool:
    key = store.trace_key(spec, target, 2, True, False, None)
    return key is not None and store.kept(key)


def _given(steps: list[tuple[TrainSpec, int]]) -> list[tuple[TrainSpec, int]]:
    # NB: the steps from the 8-bit optimizer on are the plan's own settings, which it has
    # usually traced by the time the ladder is read: those are left to this process
    return [(s, micro) for s, micro in steps if s.optimizer is not OptimizerKind.ADAMW_8BIT]


def _needed_in_worker(spec: TrainSpec, device: Device) -> int | None:
    """Device memory needed by `spec` on `device` (a full trace), or None when it fails."""
    try:
        with collector_paused():  # NB: as `plan` pauses it in its own process
            trace = trace_step(spec, target=Target.of(device))
            result, context = gpu_memory(trace, spec, device)
    except USER_CODE_ERRORS:  # the main process does the step again and reports it
        return None
    return result.peak_reserved_bytes + context


def _searched_in_worker(arguments: tuple[object, ...]) -> DistributedPlan | None:
    """`LadderWorker.search`'s plan, made in the worker."""
    with collector_paused():  # NB: as `plan` pauses it in its own process
        return plan_distributed(*arguments, SharedTraces())  # type: ignore[arg-type]
