"""The eighth blind step-time set: the five seed notes' own training jobs on an H100.

Every earlier blind set was chosen at the model's weak spots (host-bound kinds that had
missed, with one or two device-bound controls). This one is chosen by the users' notes
instead (`examples/seeds/*/spec.yaml`): each model a seed trains, at the micro-batch,
accumulation, precision, optimizer, LoRA and freezing its own configs give, moved onto an H100;
nothing was picked or dropped by how well trainfit might do. Left out: the 7B and larger jobs of
the Qwen2 notes (a full 7B DPO does not fit one H100; its 0.5B job is in), and gradient
checkpointing of the VQ notes' tight row (trainfit checkpoints a plain module's blocks its own
way, which the harness does not copy), whose accumulation and fp16 stay. Their predictions
(`results/blind8_predictions.json`) were committed before their first run."""

from __future__ import annotations

from typing import Any

ZOO = "trainfit.models.zoo"
_PRECISION = {"fp32": None, "fp16": "fp16", "bf16": "bf16"}


def _zoo(factory: str, batch: int, precision: str = "fp32", **extra: Any) -> dict[str, Any]:
    """A catalogue model of `trainfit.models.zoo` on its default inputs; `extra` holds `accum`,
    `multiplier` (per-sample rows), `lora` (LoraSpec's fields) and `freeze` (globs)."""
    build: dict[str, Any] = dict(zoo=factory, batch=batch)
    spec: dict[str, Any] = dict(model=f"{ZOO}:{factory}", batch=batch, precision=precision)
    if _PRECISION[precision]:
        build["half"] = _PRECISION[precision]
    if "accum" in extra:
        build["accum"] = spec["grad_accum"] = extra["accum"]
    if "multiplier" in extra:
        build["multiplier"] = spec["multiplier"] = extra["multiplier"]
    if "lora" in extra:
        build["lora"], spec["lora"] = dict(extra["lora"]), dict(extra["lora"])
    if "freeze" in extra:
        build["freeze"] = spec["freeze"] = tuple(extra["freeze"])
    return dict(build=build, spec=spec)


_MIDI_LORA = dict(rank=16, alpha=32, dropout=0.05, targets=("qkv", "proj"))
_REDIMNET_STAGE1 = ("stem.*", "stages.*", "to_1d.*", "pool.*")

CASES: dict[str, dict[str, Any]] = {
    # the iDAW notes: the Mac's config (fp32, 16 x 4) and the RTX 4060's (fp16 AMP, 64 x 1)
    "emotion-b16-accum4-fp32": _zoo("emotion_mlp", 16, accum=4),
    "emotion-b64-fp16": _zoo("emotion_mlp", 64, "fp16"),
    "melody-b16-accum4-fp32": _zoo("melody_transformer", 16, accum=4),
    "melody-b64-fp16": _zoo("melody_transformer", 64, "fp16"),
    "groove-b16-accum4-fp32": _zoo("groove_predictor", 16, accum=4),
    "groove-b64-fp16": _zoo("groove_predictor", 64, "fp16"),
    # the MIDI notes: micro-batch 1 x 8 accumulation at 1024 tokens; fp32 and fp16 autocast
    "midi100m-b1-accum8-fp32": _zoo("midi_transformer_100m", 1, accum=8),
    "midi100m-lora16-b1-accum8-fp32": _zoo("midi_transformer_100m", 1, accum=8, lora=_MIDI_LORA),
    "midi350m-b1-accum8-fp16": _zoo("midi_transformer_350m", 1, "fp16", accum=8),
    "midi760m-b1-accum8-fp16": _zoo("midi_transformer_760m", 1, "fp16", accum=8),
    # the speaker notes: fp16 autocast at batch 32 (both stages) and 64 (stage 1, frozen backbone)
    "redimnet-b32-fp16": _zoo("redimnet_like", 32, "fp16"),
    "redimnet-b64-frozen-fp16": _zoo("redimnet_like", 64, "fp16", freeze=_REDIMNET_STAGE1),
    # the Qwen2 notes' proof of concept: DPO of Qwen2-0.5B, 1 x 4, fp16, a reference as loaded
    "dpo-qwen2-0.5b-b1-accum4-s1024-fp16": dict(
        build=dict(
            hf="qwen2-0.5b", dtype="fp32", dpo="bf16", batch=1, seq=1024, accum=4, half="fp16"
        ),
        spec=dict(
            model="qwen2-0.5b",
            batch=1,
            seq_len=1024,
            grad_accum=4,
            precision="fp16",
            preference="dpo",
            reference_dtype="auto",
        ),
    ),
    # the VQ notes: comfortable (16 x 16 patches, fp32) and tight (1 x 8 patches, 8 steps, AMP)
    "vq-b16-x16-fp32": _zoo("vq_patch_autoencoder", 16, multiplier=16),
    "vq-b1-x8-accum8-fp16": _zoo("vq_patch_autoencoder", 1, "fp16", multiplier=8, accum=8),
}
