"""The monitor as a Hugging Face `transformers.TrainerCallback`.

    callback = TrainfitTrainerCallback(spec=spec, csv="run.csv")
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[callback])
    with callback:          # optional: the Trainer has no exception event, so an
        trainer.train()     # out-of-memory is reported only inside this block

A sample per optimizer step (`on_step_end`); its loss is the one the Trainer logs for that step
(`on_log`, so set `logging_steps=1` for a loss on every row), which is why a sample is written
when the log of its step arrives, or at the next step. The optimizer phase comes from
`on_pre_optimizer_step` and `on_optimizer_step`.

Known limitations: without the `with` block an out-of-memory error is not reported; the
Trainer's `auto_find_batch_size` catches its own out-of-memory errors, which the monitor then
does not see.
"""

from __future__ import annotations

import dataclasses
from types import TracebackType
from typing import Any

from trainfit.errors import TrainfitError
from trainfit.monitor.core import Monitor
from trainfit.monitor.oom import OomReport
from trainfit.monitor.phase import StepPhase
from trainfit.monitor.sample import Sample

try:
    from transformers import TrainerCallback
except ImportError as exc:
    raise TrainfitError(
        "TrainfitTrainerCallback needs transformers: pip install 'trainfit[hf]'"
    ) from exc


class TrainfitTrainerCallback(TrainerCallback):
    """Runs a `Monitor` over `Trainer.train`; takes the Monitor's arguments but `model`."""

    def __init__(self, **monitor_kwargs: Any) -> None:
        if "model" in monitor_kwargs:
            raise TrainfitError(
                "TrainfitTrainerCallback takes the model from the Trainer: drop model="
            )
        self.monitor = Monitor(**monitor_kwargs)
        self._pending: Sample | None = None

    @property
    def oom(self) -> OomReport | None:
        return self.monitor.oom

    @property
    def samples(self) -> tuple[Sample, ...]:
        return self.monitor.samples

    def __enter__(self) -> TrainfitTrainerCallback:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        try:
            self._flush()
            if exc is not None:
                self.monitor.report_exception(exc)
        finally:
            self.monitor.stop()
        return False  # NB: never swallow

    def _flush(self) -> None:
        if self._pending is not None:
            self.monitor.record(self._pending)
            self._pending = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        model = kwargs.get("model")
        if model is not None:
            self.monitor.model = model
        self.monitor.start()
        self.monitor._steps = state.global_step  # NB: a resumed run counts on from its step

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.monitor.tracker.set_phase(StepPhase.OPTIMIZER)

    def on_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.monitor.tracker.set_phase(StepPhase.DATA)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._flush()
        self._pending = self.monitor.advance(step=state.global_step)

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        pending = self._pending
        if pending is None or not logs or "loss" not in logs or state.global_step != pending.step:
            return
        self._pending = dataclasses.replace(pending, loss=float(logs["loss"]))
        self._flush()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._flush()
        self.monitor.stop()
