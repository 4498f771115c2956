"""`trainfit.monitor.lightning`: the Lightning callback counts optimizer steps and reports OOM."""

from __future__ import annotations

import importlib
import sys

import pytest
import torch

from tests.monitor.support import Net
from trainfit.errors import TrainfitError
from trainfit.monitor import StepPhase


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


def test_missing_lightning_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("lightning", "lightning.pytorch", "pytorch_lightning"):
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "trainfit.monitor.lightning", raising=False)
    with pytest.raises(TrainfitError, match=r"pip install lightning"):
        importlib.import_module("trainfit.monitor.lightning")
