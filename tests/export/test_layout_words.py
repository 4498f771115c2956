"""A trainer layout's typed notes and the exports' device notes in words (exact strings)."""

from __future__ import annotations

from trainfit.export.layout import (
    Beside,
    DataParallel,
    DeviceNote,
    FullSharding,
    LightningWrap,
    Machines,
    NoTf32,
    PlannedGpus,
    RoundedBatch,
)
from trainfit.export.layout_words import device_note_text, layout_note_text, layout_notes_text
from trainfit.hardware.units import GIB


def test_each_layout_note_in_words() -> None:
    assert layout_note_text(RoundedBatch(asked=30, micro_batch=1, grad_accum=8, gpus=4)) == (
        "the effective batch rounds from 30 to 32 (1 x 8 accumulation x 4 GPUs)"
    )
    assert layout_note_text(DataParallel(gpus=2)) == (
        "data parallel over 2 GPUs: the plan's memory is one GPU's; DDP adds its gradient "
        "buckets (about one more copy of the gradients) per GPU"
    )
    assert layout_note_text(PlannedGpus(planned=4, asked=8)) == (
        "sharded over the plan's 4 GPUs, not the 8 asked for"
    )
    assert layout_note_text(FullSharding(gpus=4, per_gpu_bytes=int(12.5 * GIB))) == (
        "FSDP full sharding over 4 GPUs at 12.50 GiB each (modelled, not checked on GPUs)"
    )
    assert layout_note_text(Machines(machines=2, instance="aws-p5.48xlarge")) == (
        "2 machines (aws-p5.48xlarge): set machine_rank, main_process_ip and "
        "main_process_port on each"
    )
    assert layout_note_text(NoTf32(device="t4")) == (
        "t4 has no TF32 (compute capability 8.0 on): runs as fp32"
    )
    assert layout_notes_text((Beside.PURE_BF16, Beside.BITSANDBYTES)) == [
        "pure bf16 has no trainer flag: load the model with dtype=torch.bfloat16 (no autocast)",
        "the 8-bit optimizer needs bitsandbytes where the job trains",
    ]


def test_a_device_note_is_prefixed_with_its_device() -> None:
    assert device_note_text(DeviceNote(device="t4", note=NoTf32(device="t4"))) == (
        "t4: t4 has no TF32 (compute capability 8.0 on): runs as fp32"
    )
    wrap = device_note_text(DeviceNote(device="h100", note=LightningWrap(checkpointing=True)))
    assert wrap.startswith('h100: lightning strategy "fsdp" is FSDPStrategy with no auto-wrap')
    assert "FSDPStrategy(auto_wrap_policy={Block}, activation_checkpointing_policy={Block})" in wrap
