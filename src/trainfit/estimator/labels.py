"""How each figure of an estimate was obtained, as typed labels: a `Provenance` and what the
figure rests on. `trainfit.report.labels` puts them in words; a renderer picks out, say, the
modelled figures by their provenance, never by reading its own words.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import ClassVar

from trainfit.estimator.storage import InferencePrecision
from trainfit.provenance import Provenance
from trainfit.spec import LoraSpec


class How(str, Enum):
    """How a figure was obtained, where that takes no further detail."""

    TRACED = "traced"
    """Read off the traced step."""
    MPS_TRACED = "mps traced"
    """Traced on the MPS rules (autocast lists, math attention)."""
    MPS_HEAP_REPLAY = "mps heap replay"
    """A replay through the MPS heap allocator, not checked on a Mac."""
    METAL_FLOOR = "metal floor"
    """The least Metal held beside PyTorch's heaps in public out-of-memory messages."""
    CACHING_REPLAY = "caching replay"
    """A replay through the CUDA caching allocator."""
    LIBRARY_DEFAULT = "library default"
    """PyTorch's default workspace size."""
    MEASURED_CONSTANT = "measured constant"
    """A constant measured on the device's model."""
    PER_SM_RULE = "per-sm rule"
    """A per-SM rule fitted on public out-of-memory messages."""
    H100_CONSTANTS = "h100 constants"
    """The H100's constants."""
    H100 = "h100"
    """The H100's figure (a generation's runtime context)."""
    RSS_INCREASE = "rss increase"
    """The peak RSS increase over the RSS before the model is built."""
    GLIBC_REPLAY = "glibc replay"
    """A glibc malloc replay: the resident pages of the tensors."""
    GLIBC_ELSEWHERE = "glibc elsewhere"
    """A glibc malloc replay on a host whose allocator is not glibc."""
    CPU_CONTEXT = "cpu context"
    """A constant measured on the CPU calibration host."""
    HEAP_ROUNDING = "heap rounding"
    """Simulated heap rounding plus a measured fragmentation fraction."""
    QLORA = "qlora"
    """QLoRA's 4-bit base and paged 8-bit AdamW, modelled without bitsandbytes."""
    KV_CACHE = "kv cache"
    """A traced DynamicCache, its growth replayed."""
    PREFILL_LAST_LOGITS = "prefill last logits"
    """A traced no_grad prefill with use_cache=True and logits_to_keep=1."""
    PREFILL_ALL_LOGITS = "prefill all logits"
    """A traced no_grad prefill with use_cache=True, logits for every position."""
    DECODE = "decode"
    """The longer of the host's issue time and the device time of the traced decode step."""
    FORWARD_MEMORY = "forward memory"
    """A traced no_grad forward through the caching allocator, plus the runtime context."""
    MPS_FORWARD_MEMORY = "mps forward memory"
    """A traced no_grad forward through the MPS heap allocator."""
    FORWARD_LATENCY = "forward latency"
    """The step-time model's forward only."""


@dataclass(frozen=True, slots=True)
class FigureLabel:
    """How a figure was obtained, where its kind says it all."""

    provenance: Provenance
    how: How


@dataclass(frozen=True, kw_only=True, slots=True)
class LoraLabel:
    """The LoRA adapters, traced through peft's own modules."""

    provenance: ClassVar[Provenance] = Provenance.TRACED
    lora: LoraSpec


@dataclass(frozen=True, kw_only=True, slots=True)
class WeightsLabel:
    """The stored weights of a generation: counted, or modelled where quantized."""

    precision: InferencePrecision

    @property
    def provenance(self) -> Provenance:
        quantized = self.precision in (InferencePrecision.INT8, InferencePrecision.INT4)
        return Provenance.MODELLED if quantized else Provenance.EXACT


@dataclass(frozen=True, kw_only=True, slots=True)
class PrefillLabel:
    """A prefill timed by the per-op roofline."""

    calibrated_here: bool
    """The efficiencies were measured on this GPU model (else on `calibration_device`)."""
    calibration_device: str
    provenance: ClassVar[Provenance] = Provenance.MODELLED


@dataclass(frozen=True, kw_only=True, slots=True)
class BandwidthLabel:
    """The calibrated share of the datasheet bandwidth a decode step reads at."""

    efficiency: float
    calibration_device: str
    calibration_date: str
    provenance: ClassVar[Provenance] = Provenance.MEASURED


Label = FigureLabel | LoraLabel | WeightsLabel | PrefillLabel | BandwidthLabel
"""How one figure of an estimate was obtained (words: `trainfit.report.labels`)."""
