"""The typed sections of a plan spec file (`trainfit plan spec.yaml`).

Each dataclass is one mapping of the YAML file; each field is one key, documented under it.
`None` means "not given": the `trainfit plan` option's default applies. The loader
(`trainfit.specfile.loader`) fills these from the YAML nodes and reports every problem at once;
`trainfit.specfile.fields` maps each field to its `trainfit plan` option.

Known limitations: `freeze: []` in a stage means the same as leaving `freeze` out (the stage
freezes what `training.freeze` freezes), as `--stage 50` does on the command line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path


class ClaimQuantity(str, Enum):
    """What a claim's number is; the report compares it with the plan's figure of that kind."""

    MEMORY_GIB = "memory_gib"
    MICRO_BATCH = "micro_batch"
    GPUS = "gpus"
    STEP_SECONDS = "step_seconds"
    HOURS = "hours"
    COST_USD = "cost_usd"
    PARAMS_MILLIONS = "params_millions"
    TOKENS_PER_SECOND = "tokens_per_second"
    LATENCY_MS = "latency_ms"
    DECODE_TOKENS_PER_SECOND = "decode_tokens_per_second"
    INFERENCE_MEMORY_GIB = "inference_memory_gib"
    MAX_MICRO_BATCH = "max_micro_batch"
    FITS = "fits"
    TRAINABLE_PERCENT = "trainable_percent"
    COMPONENT_GIB = "component_gib"
    USABLE_GIB = "usable_gib"
    WEIGHTS_GIB = "weights_gib"
    POWER_WATTS = "power_watts"
    ELECTRICITY_USD = "electricity_usd"
    OWNERSHIP_USD = "ownership_usd"
    PRICE_USD = "price_usd"
    USD_PER_HOUR = "usd_per_hour"
    CHECKPOINTING_SAVES_PERCENT = "checkpointing_saves_percent"
    SPOT_SAVES_PERCENT = "spot_saves_percent"


class ClaimReason(str, Enum):
    """Why a document's figure and trainfit's differ, as the spec file gives it (the report
    renders it in a phrase)."""

    DATA_LOADING = "data_loading"
    """The document's time includes loading and preprocessing data; trainfit times the step."""
    DATASET_ASSUMED = "dataset_assumed"
    """The document gives no dataset size: the run's is a guess."""
    MODEL_GUESSED = "model_guessed"
    """The document does not describe the model's layers: trainfit's is a reconstruction."""
    STATES_LEFT_OUT = "states_left_out"
    """The document leaves out full fine-tuning's fp32 gradients and optimizer state."""
    USABLE_MEMORY = "usable_memory"
    """trainfit takes Metal's recommended working set (2/3 of the RAM) as usable."""
    NO_DEVICE_SYNC = "no_device_sync"
    """The document's benchmark times a forward without synchronising the device."""
    WHOLE_SYSTEM = "whole_system"
    """The document counts the whole machine; trainfit the GPU (board power, card price)."""
    PRICE_IMPLIED = "price_implied"
    """The document's cost implies an electricity price far from trainfit's."""
    SELF_CONTRADICTORY = "self_contradictory"
    """The document's own figures for the same thing disagree."""
    BUDGET_SCOPE = "budget_scope"
    """The document's budget covers more than the training run trainfit prices."""
    HEAD_COUNTED = "head_counted"
    """trainfit counts a layer the document's figure leaves out (a classifier head)."""
    CONTEXT_FLOOR = "context_floor"
    """The CUDA context, not the model, is most of the memory of a model this small."""
    CAUTION = "caution"
    """The document's setting is a cautious choice, not the device's limit."""
    AT_THE_PEAK = "at_the_peak"
    """trainfit's component is what is live at the step's peak, not its largest size."""
    COMPUTE_BOUND = "compute_bound"
    """The GPU is busy at the smaller batch already: a larger one takes as long per sample."""
    FROZEN_NOT_KEPT = "frozen_not_kept"
    """A frozen backbone keeps no activations for backward."""
    NOT_MODELLED_HERE = "not_modelled_here"
    """trainfit does not model this part (Metal's own buffers on an Apple GPU)."""
    RULE_OF_THUMB = "rule_of_thumb"
    """The document's figure is a general rule (a config comment's "~10% speedup"), not
    worked out for this model; trainfit's is."""
    PART_COUNTED = "part_counted"
    """The document counts only part of what trainfit's figure holds (the stages' outputs of
    all the activations kept for backward)."""
    OTHER_SOURCE = "other_source"
    """The document's figure and the catalog's come from different sources or dates (a price,
    a power draw); the catalog row names its own."""
    BOARD_POWER = "board_power"
    """trainfit counts the card's board power, the most it may draw, not a lighter load's."""
    OWN_STEP_TIME = "own_step_time"
    """The document's hours are its own time per step times the steps; trainfit's step is
    another."""
    GPU_COUNT_DIFFERS = "gpu_count_differs"
    """trainfit's plan is on another number of GPUs: the document's does not hold the model,
    so the per-GPU figure is at trainfit's count."""


@dataclass(kw_only=True, slots=True)
class ClaimSetting:
    """`claims[].setting:` the setting the document's figure is at; trainfit computes its
    figure at this setting instead of the plan's."""

    micro_batch: int
    """Samples per forward/backward."""
    grad_accum: int | None = None
    """Micro-batches per optimizer step (default 1)."""
    precision: str | None = None
    """fp32 | tf32 | fp16 | bf16 (default: the plan's on the device)."""
    checkpointing: bool | None = None
    """Gradient checkpointing (default: off)."""
    compile: bool | None = None
    """torch.compile (default: off). trainfit times eager PyTorch, so a figure at a compiled
    setting is not computed: the report says so."""


class ClaimCompare(str, Enum):
    """How a claim's figure is set against the `versus` figure (ours is at the claim's own
    device, setting and models; theirs at `versus`'s)."""

    TIMES = "times"
    """ours / theirs: "the 4060 is 3-5x faster" is the M4 Pro's hours over the 4060's."""
    PERCENT_LESS = "percent_less"
    """100 x (1 - ours / theirs): "mixed precision saves 40-50% of the memory"."""
    PERCENT_MORE = "percent_more"
    """100 x (ours / theirs - 1): "checkpointing costs 20-30% more compute"."""


@dataclass(kw_only=True, slots=True)
class ClaimVersus:
    """`claims[].versus:` the document's figure is a comparison of two of trainfit's figures of
    the claim's quantity: the claim's own (its device, setting, models) against this one. A
    field left out is the claim's, except `setting`, which is the plan's when left out."""

    compare: ClaimCompare
    """times | percent_less | percent_more."""
    device: str | None = None
    """The other device (default: the claim's)."""
    setting: ClaimSetting | None = None
    """The other setting (default: the plan's on that device)."""
    model: str | None = None
    """The other model's `name` (default: the claim's)."""
    models: list[str] | None = None
    """Several models summed (default: the claim's `models`)."""
    component: list[str] | None = None
    """component_gib: the other components (default: the claim's)."""


@dataclass(kw_only=True, slots=True)
class Data:
    """`data:` the size of an epoch (top level, or per model)."""

    samples: int | None = None
    """Training samples per epoch (--samples)."""
    tokens: int | None = None
    """Training tokens per epoch (--tokens); give samples or tokens, not both."""
    eval_fraction: float | None = None
    """Evaluation samples per epoch as a fraction of the training samples (--eval-fraction)."""
    data_rate: float | None = None
    """Samples per second one process's data loader delivers (--data-rate; measure it with
    `trainfit measure-data`): a step then takes at least its share of the batch at this rate."""


@dataclass(kw_only=True, slots=True)
class StageEntry:
    """One item of `training.stages`: a stage of a staged schedule (--stage EPOCHS:PATTERN,...)."""

    epochs: float
    """Epochs of the stage."""
    freeze: list[str] | None = None
    """Globs of the parameter names frozen in the stage (default: `training.freeze`)."""


@dataclass(kw_only=True, slots=True)
class Lora:
    """`training.lora:` low-rank adapters (--lora RANK and its companions)."""

    rank: int | None = None
    """Adapter rank (--lora)."""
    alpha: float | None = None
    """Scaling alpha (--lora-alpha)."""
    dropout: float | None = None
    """Adapter dropout (--lora-dropout)."""
    targets: list[str] | None = None
    """Module names the adapters wrap, e.g. [q_proj, v_proj] (--lora-targets)."""
    qlora: bool | None = None
    """4-bit base weights (--qlora; implies LoRA)."""


@dataclass(kw_only=True, slots=True)
class Preference:
    """`training.preference:` preference training (--preference, --reference)."""

    kind: str | None = None
    """The method, e.g. dpo (--preference)."""
    reference: str | None = None
    """How the reference model's log-probabilities come: model | precomputed (--reference)."""
    dtype: str | None = None
    """The reference copy's dtype: auto | fp32 | bf16 | fp16 (--reference-dtype)."""


@dataclass(kw_only=True, slots=True)
class Training:
    """`training:` what one optimizer step and the whole run do (top level, or per model)."""

    effective_batch: int | None = None
    """Samples per optimizer step (--effective-batch); required, here or per model."""
    epochs: float | None = None
    """Epochs (--epochs); excludes `stages`."""
    stages: list[StageEntry] | None = None
    """A staged schedule (--stage, one per item); excludes `epochs`."""
    optimizer: str | None = None
    """adamw | adam | sgd | sgd-momentum | adafactor | adamw-8bit (--optimizer)."""
    optimizer_path: str | None = None
    """auto | foreach | for-loop | fused: PyTorch's optimizer implementation (--optimizer-path)."""
    precision: str | None = None
    """Force one precision (--precision); default: the best per device."""
    freeze: list[str] | None = None
    """Globs of frozen parameter names (--freeze, one per item)."""
    weights_dtype: str | None = None
    """The dtype the weights load in: auto | fp32 | bf16 | fp16 (--weights-dtype)."""
    lora: Lora | None = None
    """Low-rank adapters (--lora ...)."""
    preference: Preference | None = None
    """Preference training (--preference, --reference)."""
    strategy: str | None = None
    """auto | ddp | fsdp2 | fsdp2-hybrid | zero1 | zero2 | zero3 (--strategy)."""
    offload: str | None = None
    """none | optimizer | params (--offload)."""
    nodes: int | None = None
    """Machines (--nodes)."""


@dataclass(kw_only=True, slots=True)
class ModelEntry:
    """One item of `models:` (or the `model:` mapping): a model to plan.

    Any field of `training:` and `data:` may be given here too, nested (`training: {...}`) or
    directly in the entry (`effective_batch: 32`); it overrides the top-level value for this model.
    """

    model: str
    """Catalog name, Hugging Face model directory or hub id, or pkg.module:factory (the `plan`
    positional). A relative directory is relative to the spec file."""
    name: str | None = None
    """Short label used in the output and the report (default: `model`)."""
    inputs: list[str] | None = None
    """Inputs of a plain module, e.g. ["x=B,3,224,224:float32"] (--input, one per item)."""
    seq: int | None = None
    """Sequence length (--seq)."""
    multiplier: int | None = None
    """Per-sample multiplier of the batch dimension (--multiplier)."""
    task: str | None = None
    """The head to train (--task): a transformers task or its AutoModelFor... class name."""
    loss: str | None = None
    """pkg.module:fn(output, batch) -> loss (--loss)."""
    step_fn: str | None = None
    """pkg.module:fn(model, batch) -> loss (--step-fn)."""
    training: Training | None = None
    """This model's overrides of `training:`."""
    data: Data | None = None
    """This model's overrides of `data:`."""
    devices: list[str] | None = None
    """This model's devices, replacing the top-level `devices:` (--device)."""
    gpus: int | None = None
    """This model's GPUs per machine, replacing the top-level `gpus:` (--gpus)."""

    @property
    def label(self) -> str:
        """`name`, or the model string."""
        return self.name or self.model


@dataclass(kw_only=True, slots=True)
class Cost:
    """`cost:` prices and how a local device's price is spread (the run-cost options)."""

    kwh_price: float | None = None
    """Electricity price per kWh in USD (--kwh-price)."""
    watts: float | None = None
    """Power the local machine draws (--watts)."""
    currency: str | None = None
    """Currency of the costs shown (--currency)."""
    fx: float | None = None
    """Units of `currency` per USD (--fx)."""
    years: float | None = None
    """Years a local device is used (--years)."""
    hours_per_year: float | None = None
    """Hours a year a local device trains (--hours-per-year)."""
    deadline: float | None = None
    """Hours the run must fit in (--deadline)."""
    prices: dict[str, float] | None = None
    """Instance name -> on-demand USD per hour, replacing the catalog's (--price, one per item)."""


@dataclass(kw_only=True, slots=True)
class Measured:
    """`measured:` a step you timed, to calibrate the plan (--measured-step, --measured-on)."""

    step: float | None = None
    """Seconds per optimizer step measured with the plan's setting (--measured-step)."""
    on: str | None = None
    """The device it was measured on (--measured-on; default: the first device)."""


@dataclass(kw_only=True, slots=True)
class Inference:
    """`inference:` plan serving (--inference; the section turns it on): beside the training
    plan when the file gives an effective batch (the report's Inference section), else instead
    of it (serving only)."""

    context: int | None = None
    """Prompt tokens (--context; causal LMs only)."""
    new_tokens: int | None = None
    """Generated tokens (--new-tokens; causal LMs only)."""
    precision: list[str] | None = None
    """Weight precisions to compare, e.g. [bf16, int8, int4] (--inference-precision)."""
    batch: list[int] | None = None
    """Concurrent sequences to plan (--infer-batch)."""


@dataclass(kw_only=True, slots=True)
class Outputs:
    """`outputs:` files the plan writes. Relative paths are relative to the spec file."""

    report: str | None = None
    """Directory of the report (--report)."""
    config_dir: str | None = None
    """Directory of config_<device>.yaml (--config-dir)."""
    export: list[str] | None = None
    """Trainer configs to write: hf | lightning | accelerate | yaml | ... (--export)."""
    export_dir: str | None = None
    """Where `export` writes (--export-dir; default: the current directory)."""
    json: bool | None = None
    """Print JSON instead of tables (--json)."""


@dataclass(kw_only=True, slots=True)
class Claim:
    """One item of `claims:` a figure of the source document, compared in the report."""

    what: str
    """What the figure is, in words."""
    quantity: ClaimQuantity
    """What kind of figure (`ClaimQuantity`; docs/report.md says what each reads)."""
    value: float | list[float]
    """The document's figure, or a range [low, high]."""
    model: str | None = None
    """The model's `name` (optional when there is one model)."""
    device: str | None = None
    """The device the figure is about (optional)."""
    precision: str | None = None
    """The inference precision the figure is at (inference quantities; optional)."""
    batch: int | None = None
    """The inference batch the figure is at (inference quantities; optional)."""
    source: str | None = None
    """Where in the document the figure is."""
    why: str | None = None
    """An explanation where trainfit disagrees, in the document's terms (optional)."""
    reason: ClaimReason | None = None
    """Why trainfit's figure differs, as a typed reason the report words (optional)."""
    models: list[str] | None = None
    """Several models' figures summed (hours, costs), in place of `model`."""
    stage: int | None = None
    """The stage of a staged schedule the figure is about (1 = the first; default: all)."""
    component: list[str] | None = None
    """component_gib: the memory breakdown's components summed (parameters, gradients,
    optimizer state, activations, temporaries, workspaces, allocator overhead, runtime
    context)."""
    gpus: int | None = None
    """The GPUs the document's figure is on (1: one GPU, never a multi-GPU plan)."""
    setting: ClaimSetting | None = None
    """The document's setting, when trainfit's figure is to be computed at it."""
    versus: ClaimVersus | None = None
    """The figure is a comparison (x times, percent less or more) with trainfit's figure at
    another device, setting, model or component."""


@dataclass(kw_only=True, slots=True)
class PlanFile:
    """A whole plan spec file, as loaded by `trainfit.load_plan_spec`.

    After loading, `models` holds every model (a top-level `model:` becomes its one item) and
    `model` is None.
    """

    title: str | None = None
    """Report title."""
    description: str | None = None
    """Free text shown in the report."""
    model: str | ModelEntry | None = None
    """One model: a model string or a `ModelEntry` mapping (or use `models`)."""
    models: list[str | ModelEntry] | None = None
    """Several models; each is planned, one plan per model."""
    data: Data | None = None
    """The size of an epoch."""
    training: Training | None = None
    """What a step and the run do."""
    devices: list[str] | None = None
    """Devices to plan for (--device, one per item)."""
    gpus: int | None = None
    """GPUs of the device, data parallel (--gpus)."""
    margin: float | None = None
    """Fraction of device memory kept free (--margin)."""
    cost: Cost | None = None
    """Prices."""
    measured: Measured | None = None
    """A measured step to calibrate with."""
    inference: Inference | None = None
    """Plan serving; the section's presence turns --inference on."""
    outputs: Outputs | None = None
    """Files to write."""
    jobs: int | None = None
    """Processes to trace in (--jobs)."""
    claims: list[Claim] | None = None
    """Figures of the source document, compared in the report."""
    source: str = field(default="", metadata={"yaml": False})
    """Not a YAML field: the file's path as given."""
    directory: Path = field(default=Path("."), metadata={"yaml": False})
    """Not a YAML field: the file's directory, which relative paths are relative to."""
    lines: dict[str, int] = field(default_factory=dict, metadata={"yaml": False})
    """Not a YAML field: the line of each field given, by its path (`models[0].seq`)."""

    def entries(self) -> list[ModelEntry]:
        """Every model as a `ModelEntry` (after loading: `models`)."""
        return [m for m in self.models or () if isinstance(m, ModelEntry)]
