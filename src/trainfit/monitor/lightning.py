"""The monitor as a PyTorch Lightning callback.

    trainer = lightning.Trainer(callbacks=[TrainfitCallback(spec=spec, csv="run.csv")])

Records a sample per optimizer step (so once per `accumulate_grad_batches` batches), the phase
hooks on the LightningModule, and an OomReport when the fit dies of out-of-memory
(`on_exception`; Lightning re-raises the error). Works with `lightning.pytorch`, or with
`pytorch_lightning` where only that is installed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainfit.errors import TrainfitError
from trainfit.monitor.core import Monitor
from trainfit.monitor.oom import OomReport
from trainfit.monitor.phase import StepPhase
from trainfit.monitor.sample import Sample


def _callback_base() -> type:
    try:
        from lightning.pytorch import Callback
    except ImportError:
        try:
            from pytorch_lightning import Callback
        except ImportError as exc:
            raise TrainfitError(
                "TrainfitCallback needs PyTorch Lightning: pip install lightning"
            ) from exc
    return Callback


Callback: Any = _callback_base()


def _loss(outputs: Any) -> Any:
    if isinstance(outputs, Mapping):
        return outputs.get("loss")
    return outputs if hasattr(outputs, "item") else None


class TrainfitCallback(Callback):
    """Runs a `Monitor` over `trainer.fit`; takes the Monitor's arguments but `model`."""

    def __init__(self, **monitor_kwargs: Any) -> None:
        super().__init__()
        if "model" in monitor_kwargs:
            raise TrainfitError("TrainfitCallback takes the model from the trainer: drop model=")
        self.monitor = Monitor(**monitor_kwargs)
        self._global_step = 0

    @property
    def oom(self) -> OomReport | None:
        return self.monitor.oom

    @property
    def samples(self) -> tuple[Sample, ...]:
        return self.monitor.samples

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self.monitor.model = pl_module
        self.monitor.start()
        self._global_step = trainer.global_step
        # NB: Lightning runs forward and backward inside optimizer.step(closure), so the
        # optimizer's own step hooks would mark the whole step; on_before_optimizer_step
        # marks the update alone.

    def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        self.monitor.tracker.set_phase(StepPhase.OPTIMIZER)

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if trainer.global_step == self._global_step:
            self.monitor.tracker.set_phase(StepPhase.DATA)
            return  # NB: an accumulation micro-batch: no optimizer step happened
        self._global_step = trainer.global_step
        sample = self.monitor.advance(_loss(outputs), step=trainer.global_step)
        if sample is not None:
            self.monitor.record(sample)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        try:
            self.monitor.report_exception(exception)
        finally:
            self.monitor.stop()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self.monitor.stop()
