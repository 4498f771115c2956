"""`trainfit.monitor.hf`: the Hugging Face Trainer callback (CPU)."""

from __future__ import annotations

import pytest
import torch


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
