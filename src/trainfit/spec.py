"""What the user asks: a model, a batch and the training settings of one step."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

import torch

from trainfit.errors import SpecError, UnknownNameError


class Precision(str, Enum):
    """How the step computes and what it keeps.

    fp16 and bf16 are CUDA autocast with fp32 master weights (fp16 adds a GradScaler); pure-bf16
    casts weights, gradients and optimizer state to bf16; tf32 is fp32 storage with TF32 matmuls.
    """

    FP32 = "fp32"
    TF32 = "tf32"
    FP16 = "fp16"
    BF16 = "bf16"
    PURE_BF16 = "pure-bf16"

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        """The dtype autocast runs matmuls in, or None when there is no autocast."""
        return {Precision.FP16: torch.float16, Precision.BF16: torch.bfloat16}.get(self)

    @property
    def param_dtype(self) -> torch.dtype:
        """The dtype the parameters (and so gradients and optimizer state) are stored in."""
        return torch.bfloat16 if self is Precision.PURE_BF16 else torch.float32


class WeightsDtype(str, Enum):
    """The dtype the model's weights are loaded in, as the user's code loads them.

    `auto` is what `from_pretrained` loads: the config's `torch_dtype`/`dtype` for a Hugging
    Face model, fp32 for a plain module. It applies to the frozen weights (a LoRA base, a DPO
    reference copy); a full fine-tune keeps fp32 master weights (as HF Trainer and accelerate's
    mixed precision train them) unless the precision is pure-bf16.
    """

    AUTO = "auto"
    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"

    @property
    def dtype(self) -> torch.dtype | None:
        """The torch dtype, or None for `auto` (resolved against the model's config)."""
        return {
            WeightsDtype.FP32: torch.float32,
            WeightsDtype.BF16: torch.bfloat16,
            WeightsDtype.FP16: torch.float16,
        }.get(self)


class OptimizerPath(str, Enum):
    """Which of PyTorch's implementations runs the optimizer step.

    `auto` is PyTorch's own default on the target: foreach on CUDA for Adam, AdamW and SGD, the
    for-loop for Adafactor and on the CPU. `fused` is one kernel per step (`fused=True`: Adam,
    AdamW and SGD): no per-step temporaries, and its step counters live on the device.
    """

    AUTO = "auto"
    FOREACH = "foreach"
    FOR_LOOP = "for-loop"
    FUSED = "fused"


class PreferenceKind(str, Enum):
    """Preference-training losses trainfit runs (see `trainfit.models.preference`)."""

    DPO = "dpo"


class ReferenceKind(str, Enum):
    """Where a preference step's reference log-probabilities come from."""

    MODEL = "model"
    """A frozen copy of the policy, in the policy's dtype, run under no_grad each step."""
    PRECOMPUTED = "precomputed"
    """Given in the batch (computed once before training); no reference weights on device."""


class OptimizerKind(str, Enum):
    """Optimizers whose state and step temporaries trainfit models."""

    ADAMW = "adamw"
    ADAM = "adam"
    SGD = "sgd"
    SGD_MOMENTUM = "sgd-momentum"
    ADAFACTOR = "adafactor"
    ADAMW_8BIT = "adamw-8bit"


def parse_enum(kind: type[Enum], what: str, value: str | Enum) -> Enum:
    """`kind(value)` with a clear error listing the choices."""
    if isinstance(value, kind):
        return value
    text = str(value).strip().lower().replace("_", "-")
    for member in kind:
        if member.value == text:
            return member
    raise UnknownNameError(what, str(value), [m.value for m in kind])


_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float16": torch.float16,
    "fp16": torch.float16,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float64": torch.float64,
    "int64": torch.int64,
    "long": torch.int64,
    "int32": torch.int32,
    "bool": torch.bool,
}

_INPUT_RE = re.compile(
    r"^(?P<name>[A-Za-z_]\w*)=(?P<dims>[^:]+)(?::(?P<dtype>[a-z0-9]+)(?:<(?P<high>\d+))?)?$"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class InputSpec:
    """One input tensor of a plain module: `name=B,3,224,224:float32` or `ids=B,512:int64<50257`.

    `B` in the dims stands for the micro-batch (times the per-sample multiplier).
    """

    name: str
    """The forward() keyword argument this tensor is passed as."""
    dims: tuple[int | str, ...]
    """Sizes; the string "B" marks the batch dimension."""
    dtype: torch.dtype = torch.float32
    """Element type."""
    high: int | None = None
    """For integer inputs: values are drawn from [0, high) in real runs."""

    @classmethod
    def parse(cls, text: str) -> InputSpec:
        """Parse `name=DIMS[:dtype[<high]]`, raising SpecError naming the bad part."""
        match = _INPUT_RE.match(text.strip().replace(" ", ""))
        if match is None:
            raise SpecError(
                [
                    f"malformed input {text!r}: expected NAME=DIMS[:DTYPE], "
                    "e.g. 'x=B,3,224,224:float32' or 'ids=B,512:int64<50257'"
                ]
            )
        dims: list[int | str] = []
        for part in match["dims"].split(","):
            if part == "B":
                dims.append("B")
            elif part.isdigit() and int(part) > 0:
                dims.append(int(part))
            else:
                raise SpecError(
                    [
                        f"malformed input {text!r}: dimension {part!r} is neither B "
                        "nor a positive int"
                    ]
                )
        dtype_name = match["dtype"] or "float32"
        if dtype_name not in _DTYPES:
            raise UnknownNameError("input dtype", dtype_name, _DTYPES, hint=f"in input {text!r}")
        dtype = _DTYPES[dtype_name]
        high = int(match["high"]) if match["high"] else None
        if high is not None and (dtype.is_floating_point or high < 1):
            raise SpecError([f"input {text!r}: '<{high}' is a value bound for integer inputs only"])
        return cls(name=match["name"], dims=tuple(dims), dtype=dtype, high=high)

    def shape(self, batch: int) -> tuple[int, ...]:
        """The concrete shape for a batch (already multiplied by any per-sample multiplier)."""
        return tuple(batch if d == "B" else int(d) for d in self.dims)


@dataclass(frozen=True, kw_only=True, slots=True)
class LoraSpec:
    """LoRA adapters on a frozen base (and, with `qlora`, a 4-bit NF4 base)."""

    rank: int = 8
    """Rank r of each adapter (A is r x in, B is out x r)."""
    alpha: float | None = None
    """Scaling numerator (lora_alpha); None takes 2 * rank."""
    dropout: float = 0.0
    """Dropout on the adapters' input, in [0, 1)."""
    targets: tuple[str, ...] = ()
    """Module names to adapt (peft's target_modules); empty takes peft's default for the
    architecture, else every Linear but the output head."""
    qlora: bool = False
    """4-bit NF4 base weights with double quantisation (modelled; bitsandbytes' recipe)."""

    def __post_init__(self) -> None:
        problems: list[str] = []
        coerce = object.__setattr__
        if isinstance(self.targets, str):
            coerce(self, "targets", tuple(t for t in self.targets.split(",")))
        coerce(self, "targets", tuple(str(t).strip() for t in self.targets))
        if not isinstance(self.rank, int) or isinstance(self.rank, bool) or self.rank < 1:
            problems.append(f"LoRA rank must be a positive integer, got {self.rank!r}")
        if self.alpha is None and not problems:
            coerce(self, "alpha", float(2 * self.rank))
        elif self.alpha is not None and not (
            isinstance(self.alpha, (int, float)) and self.alpha > 0
        ):
            problems.append(f"LoRA alpha must be > 0, got {self.alpha!r}")
        if not isinstance(self.dropout, (int, float)) or not 0 <= self.dropout < 1:
            problems.append(f"LoRA dropout must be in [0, 1), got {self.dropout!r}")
        if any(not t for t in self.targets):
            problems.append(f"LoRA targets {','.join(self.targets)!r} hold an empty name")
        if problems:
            raise SpecError(problems)

    @classmethod
    def of(cls, value: LoraSpec | dict[str, Any]) -> LoraSpec:
        """A LoraSpec from itself or a dict of its fields (naming unknown keys)."""
        if isinstance(value, LoraSpec):
            return value
        if not isinstance(value, dict):
            raise SpecError([f"lora must be a LoraSpec or a dict of its fields, got {value!r}"])
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(value) - known)
        if unknown:
            raise SpecError(
                [
                    f"unknown LoRA field(s) {', '.join(unknown)}; "
                    f"choose from {', '.join(sorted(known))}"
                ]
            )
        return cls(**value)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "rank": self.rank,
            "alpha": self.alpha,
            "dropout": self.dropout,
            "targets": list(self.targets),
            "qlora": self.qlora,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainSpec:
    """One training step to estimate or measure.

    Build it with keyword arguments; strings are accepted for enums. Every problem is collected
    and raised together as a SpecError.
    """

    model: str = "gpt2"
    """A catalog name, a local Hugging Face model directory, a hub id, or `pkg.module:factory`."""
    batch: int = 1
    """Micro-batch: samples per forward/backward."""
    seq_len: int | None = None
    """Sequence length for language and speech models; None takes the model's default."""
    inputs: tuple[InputSpec, ...] = ()
    """Input tensors of a plain module (overrides the catalog defaults)."""
    multiplier: int = 1
    """Per-sample multiplier of the batch dimension (e.g. patches per spectrogram)."""
    precision: Precision = Precision.FP32
    """Numerics of the step."""
    optimizer: OptimizerKind = OptimizerKind.ADAMW
    """Optimizer whose state and step the trace runs."""
    checkpointing: bool = False
    """Gradient (activation) checkpointing."""
    checkpoint_modules: str | None = None
    """For plain modules: glob of qualified module names to checkpoint; default is the blocks of
    every ModuleList not inside another."""
    freeze: tuple[str, ...] = ()
    """Glob patterns of parameter names that are frozen (requires_grad=False)."""
    grad_clip: float | None = None
    """Clip the gradient norm to this value (clip_grad_norm_)."""
    grad_accum: int = 1
    """Micro-batches per optimizer step."""
    loss: str | None = None
    """`pkg.module:fn(output, batch) -> loss` for plain modules."""
    step_fn: str | None = None
    """`pkg.module:fn(model, batch) -> loss`: a user's own forward + loss."""
    device: str = "h100"
    """Target device name (see `trainfit devices`)."""
    task: str | None = None
    """The head to train, overriding the class the config or catalog chooses: a transformers
    task ("sequence-classification", "causal-lm", ...) or its auto class's name
    ("AutoModelForSequenceClassification"); see trainfit.models.heads."""
    lora: LoraSpec | None = None
    """LoRA (or QLoRA) adapters on a frozen base, through peft; a dict of LoraSpec's fields
    is accepted."""
    preference: PreferenceKind | None = None
    """Preference training ("dpo"): `batch` counts pairs, each a chosen and a rejected
    sequence of `seq_len` tokens (causal LMs only)."""
    reference: ReferenceKind = ReferenceKind.MODEL
    """With `preference`: a frozen reference model on the device, or precomputed log-probs."""
    weights_dtype: WeightsDtype = WeightsDtype.AUTO
    """The dtype the weights are loaded in (see `WeightsDtype`); on a full fine-tune only fp32
    (mixed precision) or bf16 with precision pure-bf16."""
    reference_dtype: WeightsDtype | None = None
    """With a preference reference model: its dtype; None takes the policy's weights' dtype."""
    optimizer_path: OptimizerPath = OptimizerPath.AUTO
    """Which implementation runs the optimizer step (see `OptimizerPath`)."""
    use_cache: bool | None = None
    """transformers' `config.use_cache` in the train-mode forward; None keeps the config's own
    value for a user's config (a local directory or hub id) and False for a catalog model."""

    def __post_init__(self) -> None:
        problems = self._type_problems()
        if problems:
            raise SpecError(problems)  # NB: the checks below read these fields as typed
        coerce = object.__setattr__
        try:
            coerce(self, "precision", parse_enum(Precision, "precision", self.precision))
        except UnknownNameError as exc:
            problems.append(str(exc))
        try:
            coerce(self, "optimizer", parse_enum(OptimizerKind, "optimizer", self.optimizer))
        except UnknownNameError as exc:
            problems.append(str(exc))
        if self.preference is not None:
            try:
                coerce(
                    self, "preference", parse_enum(PreferenceKind, "preference", self.preference)
                )
            except UnknownNameError as exc:
                problems.append(str(exc))
        try:
            coerce(self, "reference", parse_enum(ReferenceKind, "reference", self.reference))
        except UnknownNameError as exc:
            problems.append(str(exc))
        try:
            path = parse_enum(OptimizerPath, "optimizer path", self.optimizer_path)
            coerce(self, "optimizer_path", path)
        except UnknownNameError as exc:
            problems.append(str(exc))
        problems.extend(self._dtype_problems())
        if self.preference is None and self.reference is ReferenceKind.PRECOMPUTED:
            problems.append(
                "reference 'precomputed' needs preference training: add --preference dpo"
            )
        if self.preference is not None and (self.step_fn or self.loss):
            problems.append(
                "--preference computes its own loss: drop --step-fn/--loss, or drop --preference"
            )
        coerce(
            self,
            "inputs",
            tuple(InputSpec.parse(i) if isinstance(i, str) else i for i in self.inputs),
        )
        coerce(self, "freeze", tuple(self.freeze))
        problems += _repeated_inputs(self.inputs)
        if self.lora is not None:
            try:
                coerce(self, "lora", LoraSpec.of(self.lora))
            except SpecError as exc:
                problems.extend(exc.problems)
        for name in ("batch", "multiplier", "grad_accum"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                problems.append(f"{name} must be a positive integer, got {value!r}")
        if self.seq_len is not None and (not isinstance(self.seq_len, int) or self.seq_len < 1):
            problems.append(f"seq_len must be a positive integer, got {self.seq_len!r}")
        if self.use_cache is not None and not isinstance(self.use_cache, bool):
            problems.append(f"use_cache must be true, false or unset, got {self.use_cache!r}")
        if self.grad_clip is not None and not self.grad_clip > 0:
            problems.append(f"grad_clip must be > 0, got {self.grad_clip!r}")
        if self.loss and self.step_fn:
            problems.append(
                "--loss and --step-fn conflict: a step function computes its own loss; give one"
            )
        if self.checkpoint_modules and not self.checkpointing:
            problems.append(
                "checkpoint_modules is set but checkpointing is off: add --checkpointing"
            )
        from trainfit.hardware.catalog import get_device

        try:
            get_device(self.device)
        except UnknownNameError as exc:
            problems.append(str(exc))
        if not self.model:
            problems.append(
                "model is empty: give a catalog name, a directory or pkg.module:factory"
            )
        if problems:
            raise SpecError(problems)

    def _type_problems(self) -> list[str]:
        """The fields of the wrong Python type, each named with what it takes; one string
        where a sequence of them is expected (`freeze`, `inputs`) is taken as one item."""
        coerce = object.__setattr__
        for name in ("freeze", "inputs"):
            if isinstance(getattr(self, name), (str, InputSpec)):
                coerce(self, name, (getattr(self, name),))
        problems = []
        if not isinstance(self.model, str):
            kind = type(self.model).__name__
            if isinstance(self.model, torch.nn.Module):
                problems.append(
                    f"model is a live {kind}: a TrainSpec names its model (a catalog name, a "
                    "directory or pkg.module:factory); pass the module to "
                    "estimate(model=module, sample=batch) or autofit(module, sample, ...)"
                )
            else:
                problems.append(
                    f"model must be a catalog name, a directory or pkg.module:factory (str), "
                    f"got {kind}"
                )
        if not isinstance(self.device, str):
            problems.append(
                f"device must be one device's name (str; see `trainfit devices`), "
                f"got {type(self.device).__name__}"
            )
        for name in ("loss", "step_fn"):
            value = getattr(self, name)
            if callable(value):
                problems.append(
                    f"{name} is a callable: name it as pkg.module:fn, or give it with a live "
                    f"model: estimate(model=module, sample=batch, {name}=fn)"
                )
            elif value is not None and not isinstance(value, str):
                problems.append(f"{name} must be pkg.module:fn (str), got {type(value).__name__}")
        for name in ("task", "checkpoint_modules"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                problems.append(f"{name} must be a str, got {type(value).__name__}")
        for name, kinds in (("freeze", (str,)), ("inputs", (str, InputSpec))):
            value = getattr(self, name)
            if not isinstance(value, (tuple, list)) or not all(isinstance(v, kinds) for v in value):
                problems.append(
                    f"{name} must be a list of {' or '.join(k.__name__ for k in kinds)}, "
                    f"got {value!r}"
                )
        return problems

    def _dtype_problems(self) -> list[str]:
        """Parse the weights and reference dtypes; name the combinations no user step runs."""
        coerce = object.__setattr__
        problems: list[str] = []
        for name in ("weights_dtype", "reference_dtype"):
            value = getattr(self, name)
            if value is None:
                continue
            try:
                coerce(self, name, parse_enum(WeightsDtype, name.replace("_", " "), value))
            except UnknownNameError as exc:
                problems.append(str(exc))
        if problems:
            return problems
        weights = self.weights_dtype
        pure = self.precision is Precision.PURE_BF16
        if self.lora is None and weights is WeightsDtype.FP16:
            problems.append(
                "weights dtype fp16 on a full fine-tune does not train (fp16 weights lose the "
                "updates): use --precision fp16 (fp32 master weights) or --weights-dtype bf16 "
                "with --precision pure-bf16"
            )
        elif self.lora is None and weights is WeightsDtype.BF16 and not pure:
            problems.append(
                "weights dtype bf16 on a full fine-tune is pure bf16: add --precision pure-bf16, "
                "or drop --weights-dtype (fp32 master weights under mixed precision)"
            )
        elif self.lora is None and weights is WeightsDtype.FP32 and pure:
            problems.append(
                "weights dtype fp32 conflicts with --precision pure-bf16 (bf16 weights): drop one"
            )
        if self.reference_dtype is not None and (
            self.preference is None or self.reference is ReferenceKind.PRECOMPUTED
        ):
            problems.append(
                "reference dtype needs a reference model: add --preference dpo "
                "(with --reference model)"
            )
        return problems

    @property
    def rows(self) -> int:
        """Leading dimension of each input: micro-batch times the per-sample multiplier."""
        return self.batch * self.multiplier

    @property
    def sample_unit(self) -> str:
        """What one sample of the batch is, for labels: "pairs" in preference training."""
        return "pairs" if self.preference is not None else "samples"


def _repeated_inputs(inputs: tuple[InputSpec, ...]) -> list[str]:
    """A line for each input name given more than once (the last would replace the others)."""
    names = [i.name for i in inputs if isinstance(i, InputSpec)]
    return [
        f"input {name!r} is given {names.count(name)} times: give each forward() argument one "
        "--input"
        for name in sorted({n for n in names if names.count(n) > 1})
    ]
