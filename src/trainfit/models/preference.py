"""Preference training (DPO): the policy, its reference and the loss of one step over pairs.

`preference_program()` turns a causal LM's `StepProgram` into a DPO step, the way TRL's
DPOTrainer runs one by default: the batch holds `batch` pairs, each a chosen and a rejected
sequence of `seq` tokens; the policy scores all 2 x batch sequences in one concatenated
forward; the reference either is a frozen copy of the policy (in the policy's weights' dtype
or the one asked, eval mode, run under no_grad in the same forward phase) or its
log-probabilities come precomputed in the batch. The loss is DPO's sigmoid loss,
-log sigmoid(beta * margin), on per-sequence sums of token log-probabilities
(Rafailov et al. 2023, eq. 7).

The reference copy is registered under the policy as a `FrozenReference` child, so that every
path that moves, casts, fakes or counts `program.model` (the tracer, `measure`, max-batch) sees
its weights as parameters without further changes; its parameters never train and it stays in
eval mode when the policy is put in train mode.

Known limitations:
- no padding: every sequence is `seq` tokens and no attention mask is built (TRL pads chosen
  and rejected to the longest of the batch, so a padded batch is as large as this one);
- the per-token log-probs are a full fp32 log_softmax over the vocabulary (as
  `benchmarks/accuracy/user_steps.py:dpo_step`, measured on an H100 within 0.1%); TRL's
  `selective_log_softmax` takes a logsumexp row by row, which keeps a smaller peak at the logits;
- the prompt tokens are scored like the completion (TRL masks the prompt out of the sum; the
  memory is the same, the values differ);
- only the sigmoid (DPO) loss; IPO, KTO, ORPO and SimPO are not modelled.
"""

from __future__ import annotations

import copy
import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

from trainfit.errors import SpecError
from trainfit.models.program import DpoLoss, StepProgram
from trainfit.spec import ReferenceKind, TrainSpec

BETA = 0.1
"""DPO's temperature (TRL's default); it does not change memory or time."""

REFERENCE_NAME = "trainfit_reference"
"""The attribute the reference copy is registered under, on the policy."""


class FrozenReference(nn.Module):
    """A frozen copy of the policy: no gradients, always in eval mode."""

    def __init__(self, policy: nn.Module, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.model = copy.deepcopy(policy)
        if dtype is not None:
            self.model.to(dtype)
        self.model.requires_grad_(False)
        self.model.eval()

    def train(self, mode: bool = True) -> FrozenReference:
        """Stay in eval mode whatever the policy is put in (TRL evaluates its reference)."""
        return super().train(False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids).logits


def reference_of(policy: nn.Module) -> FrozenReference | None:
    """The frozen reference registered on `policy`, if any."""
    ref = getattr(policy, REFERENCE_NAME, None)
    return ref if isinstance(ref, FrozenReference) else None


def reference_parameter_ids(model: nn.Module) -> set[int]:
    """ids of the reference copy's parameters (to leave them out of parameter counts)."""
    ref = reference_of(model)
    return set() if ref is None else {id(p) for p in ref.parameters()}


def sequence_logps(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """Sum over positions of log p(next token) under `model`: ids (N, T) -> (N,)."""
    # NB: the model's output (its 16-bit logits) dies at the end of this expression; `.float()`
    # copies the (N, T-1, V) slice to fp32 and log_softmax makes another fp32 tensor of that
    # size (kept for backward): at a 150k vocabulary these are the step's peak. TRL keeps the
    # output alive while it computes the log-probs (one more logits tensor at the peak).
    logps = torch.log_softmax(model(input_ids=ids).logits[:, :-1].float(), dim=-1)
    return logps.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1).sum(-1)


def dpo_loss(
    policy_chosen: torch.Tensor,
    policy_rejected: torch.Tensor,
    ref_chosen: torch.Tensor,
    ref_rejected: torch.Tensor,
    beta: float = BETA,
) -> torch.Tensor:
    """DPO's sigmoid loss: mean of -log sigmoid(beta * (policy margin - reference margin))."""
    margin = (policy_chosen - ref_chosen) - (policy_rejected - ref_rejected)
    return -F.logsigmoid(beta * margin).mean()


def preference_program(
    program: StepProgram, spec: TrainSpec, reference_dtype: torch.dtype | None = None
) -> StepProgram:
    """The DPO step of a causal LM's `program` (its reference copy in `reference_dtype`, None
    keeping the policy's), or a SpecError for any other model."""
    if program.task != "causal-lm":
        what = program.task or "a plain module"
        raise SpecError(
            [
                f"--preference {spec.preference.value} trains causal language models only; "
                f"{spec.model} is {what}: choose a causal LM (e.g. gpt2, qwen2-0.5b)"
            ]
        )
    if spec.multiplier != 1:
        raise SpecError(
            [f"--preference counts pairs in --batch; --multiplier {spec.multiplier} must be 1"]
        )
    precomputed = spec.reference is ReferenceKind.PRECOMPUTED
    model = program.model
    if not precomputed:
        model.add_module(REFERENCE_NAME, FrozenReference(model, reference_dtype))
    single = program.make_batch

    def make_batch(device: torch.device, real: bool) -> dict[str, torch.Tensor]:
        chosen = single(device, real)["input_ids"]
        rejected = single(device, real)["input_ids"]
        batch = {"chosen_input_ids": chosen, "rejected_input_ids": rejected}
        if precomputed:
            pairs = chosen.shape[0]
            for name in ("reference_chosen_logps", "reference_rejected_logps"):
                batch[name] = (
                    -torch.rand(pairs, device=device) * 100.0
                    if real and device.type != "meta"
                    else torch.empty(pairs, device=device)
                )
        return batch

    def compute_loss(m: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        chosen = batch["chosen_input_ids"]
        pairs = chosen.shape[0]
        ids = torch.cat([chosen, batch["rejected_input_ids"]], dim=0)
        policy = sequence_logps(m, ids)
        if precomputed:
            ref_chosen = batch["reference_chosen_logps"]
            ref_rejected = batch["reference_rejected_logps"]
        else:
            reference = reference_of(m)
            if reference is None:
                raise SpecError(["the DPO step's model lost its frozen reference copy"])
            with torch.no_grad():
                ref = sequence_logps(reference.model, ids)
            ref_chosen, ref_rejected = ref[:pairs], ref[pairs:]
        return dpo_loss(policy[:pairs], policy[pairs:], ref_chosen, ref_rejected)

    loss = DpoLoss(beta=BETA, precomputed=precomputed)
    return dataclasses.replace(
        program,
        make_batch=make_batch,
        compute_loss=compute_loss,
        description=dataclasses.replace(program.description, preference=loss),
        loss_note=loss,
        tokens_per_sample=None
        if program.tokens_per_sample is None
        else 2 * program.tokens_per_sample,
    )
