"""The bytes a step's model states need whatever the batch: a lower bound without a trace.

Weights, gradients and optimizer state stay resident through the optimizer step, so their sum
(plus the smallest runtime context) is a floor under the device memory any micro-batch needs.
Computed from the model built on the meta device, which is instant next to a trace; the plan
uses it to skip settings that cannot fit at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainfit.models.lora import parameter_counts as lora_parameter_counts
from trainfit.models.source import build_program
from trainfit.optim import effective_optimizer, optimizer_entry
from trainfit.spec import Precision, TrainSpec
from trainfit.trace import store
from trainfit.training import apply_settings


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelStates:
    """Bytes of weights, gradients and optimizer state of one setting."""

    parameter_bytes: int
    gradient_bytes: int
    optimizer_state_bytes: int

    def total(self) -> int:
        return self.parameter_bytes + self.gradient_bytes + self.optimizer_state_bytes


def parameter_counts(spec: TrainSpec) -> tuple[int, int]:
    """(all, trainable) parameter elements of `spec`'s model, ties counted once (kept on disk
    with the traces: `trainfit.trace.store.remembered`)."""

    def count() -> tuple[int, int]:
        program = build_program(spec, "meta")
        apply_settings(program, spec)
        return lora_parameter_counts(program.model)

    return store.remembered("parameter counts", spec, count)


def model_states(spec: TrainSpec, counts: tuple[int, int] | None = None) -> ModelStates:
    """Weights, gradients and optimizer state of `spec` (its batch does not matter).

    `counts` are `parameter_counts(spec)` when already known (they do not depend on the
    precision, optimizer or checkpointing).

    NB: a lower bound for the optimizers whose state has small tensors in fp32 (8-bit AdamW
    keeps tensors under 4096 elements in fp32) or factored moments (Adafactor: counted as 0):
    `OptimizerEntry.state_bytes_per_element`.
    """
    total, trainable = counts or parameter_counts(spec)
    dtype_bytes = 2 if spec.precision is Precision.PURE_BF16 else 4
    entry = optimizer_entry(effective_optimizer(spec.optimizer, spec.lora))
    per_element = entry.state_bytes_per_element(dtype_bytes)
    # NB: QLoRA: 4-bit weights, half a byte each, as a floor for every parameter
    parameter_bytes = (
        total // 2 if spec.lora is not None and spec.lora.qlora else total * dtype_bytes
    )
    return ModelStates(
        parameter_bytes=parameter_bytes,
        gradient_bytes=trainable * dtype_bytes,
        optimizer_state_bytes=trainable * per_element,
    )
