"""Device memory per GPU (rank) of a step spread over several GPUs, from the single-GPU trace.

The traced step (one GPU, the same micro-batch) is replayed through the caching allocator with
each model-state storage resized to what one rank keeps (`strategy.divisors`), and what the
engine adds beside it is counted on top:

- ddp: the gradient buckets, a second full copy of the gradients (torch DDP's defaults,
  `gradient_as_bucket_view=False`: the reducer copies each gradient into its bucket,
  torch/nn/parallel/distributed.py; the first step's one bucket of every gradient is rebuilt
  at the second forward into `bucket_cap_mb=25` buckets, the same bytes). A weight tied to
  another (an embedding and its output head) is one parameter: one gradient, one bucket
  slot, one optimizer state, as the trace counts it. Measured on 2 x H100 (Llama-3.2-1B,
  qwen2-0.5b, gpt2-medium): the allocator's peak is the replay's plus the buckets to 0.01 GB,
  except a transient (below).
- fsdp2, fsdp2-hybrid: the gathered compute-dtype parameters of the root unit (kept gathered
  between forward and backward: FSDP2 does not reshard the root after forward) and of two
  blocks (the one computed and the one prefetched), and the unsharded gradients of the root
  (compute dtype, alive through backward) and of one block (compute dtype plus the fp32
  `reduce_dtype` copy that is reduce-scattered). Autocast's cached weight copies are not there
  (MixedPrecisionPolicy casts instead). FSDP2's MixedPrecisionPolicy runs the forward and
  backward on bf16 parameters *without* autocast, so the ops autocast would run in fp32
  (layer_norm, softmax, pow: GPT-2's tanh GELU) run in bf16 and save bf16 activations: the
  step is traced in pure bf16 (`traced_precision`) and its states rescaled to fp32 (measured
  on 2 x H100, benchmarks/sharded/results/multigpu_h100.md: gpt2-medium's activations 10.2 GB
  under autocast, 6.7 GB so). FSDP2's sharded gradients are views of the reduce-scatter
  output, allocated on the reduce-scatter stream (torch/distributed/fsdp/_fully_shard/
  _fsdp_collectives.py, `foreach_reduce`); the caching allocator keeps a pool per stream, so
  once freed (zero_grad) their blocks are not reused by the default stream's activations: they
  are taken out of the replay and counted beside it, a full share, all the time.
- zero1/2/3 (DeepSpeed, *modelled*: not run on a GPU here): 16-bit parameters and gradients,
  an fp32 master copy sharded with the optimizer state, and DeepSpeed's default buffers
  (`reduce_bucket_size` and `allgather_bucket_size` 5e8 elements; stage 3:
  `stage3_prefetch_bucket_size` 5e7 and at most `stage3_max_live_parameters` 1e9 elements
  gathered; deepspeed.ai/docs/config-json, DeepSpeed runtime/zero/config.py).
- NCCL's own buffers (measured on 2 x H200, `memory.runtime.nccl_bytes`).

Offload moves the states (and, for the optimizer, its step) to host RAM; the GPU keeps the
gathered units and buffers. Host RAM per node = what each rank offloads x GPUs per node.

Known limitations: the engine's buffers are added at the step's peak (they are persistent or
alive at the peak of backward, but allocator fragmentation from them is not replayed); every
block is as large as the largest; DeepSpeed's figures are not checked on a GPU. DDP's first
bucket can outlive its rebuild: on qwen2-0.5b (micro-batch 2, seq 1024) ranks held it, a
second copy of the gradients' bytes, through the second step's forward and backward, where
that model's peak is, in 3 of 4 ranks measured (not on a rank whose allocations were being
recorded, nor on gpt2-medium or Llama-3.2-1B); what holds it was not observed (a candidate:
ProcessGroupNCCL's stash of a collective's tensors, emptied by its watchdog thread when DDP
does not wait on the work itself) and it is not modelled (the allocated peak is then
under-predicted by the buckets' bytes).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainfit.distributed.strategy import Layout, Offload, Strategy, divisors
from trainfit.distributed.units import Units
from trainfit.estimator.step import gpu_memory
from trainfit.hardware.catalog import Device
from trainfit.memory.runtime import nccl_bytes
from trainfit.spec import Precision, TrainSpec
from trainfit.trace.autocast import WEIGHT_CAST
from trainfit.trace.recorder import Event
from trainfit.trace.step import Category, StepTrace
from trainfit.training import Phase

DS_REDUCE_BUCKET = 500_000_000
"""DeepSpeed `reduce_bucket_size` default (elements)."""
DS_ALLGATHER_BUCKET = 500_000_000
"""DeepSpeed `allgather_bucket_size` default (elements; stages 1 and 2)."""
DS_PREFETCH_BUCKET = 50_000_000
"""DeepSpeed `stage3_prefetch_bucket_size` default (elements)."""
DS_MAX_LIVE = 1_000_000_000
"""DeepSpeed `stage3_max_live_parameters` default (elements)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RankMemory:
    """What one GPU holds at the step's peak, and what the host holds per node."""

    strategy: Strategy
    offload: Offload
    gpus: int
    nodes: int
    micro_batch: int
    total_bytes: int
    """Device memory one rank needs: the allocator's reserved peak, the runtime context,
    the engine's buffers and NCCL's."""
    peak_allocated_bytes: int
    """The allocator's allocated peak (`torch.cuda.max_memory_allocated`): the replay's, plus
    the engine's buffers (they go through the caching allocator; NCCL's and the context do
    not)."""
    parameters_bytes: int
    """Live at the replayed peak: this rank's share of the parameters."""
    gradients_bytes: int
    optimizer_state_bytes: int
    activations_bytes: int
    other_bytes: int
    """Temporaries, workspaces and the allocator's cached blocks at the peak."""
    engine_bytes: int
    """The engine's own: gathered units and unsharded gradients (FSDP2, ZeRO-3), FSDP2's sharded
    gradients (in the reduce-scatter stream's pool), gradient buckets (DDP, ZeRO) and the fp32
    master shard (ZeRO)."""
    nccl_bytes: int
    context_bytes: int
    host_bytes_per_node: int
    """Host RAM the offloaded states take on each node (0 without offload)."""


def traced_precision(strategy: Strategy, precision: Precision) -> Precision:
    """The precision the step's forward and backward really run in under `strategy`: FSDP2 with
    bf16 casts the parameters (MixedPrecisionPolicy, no autocast), so its step is a pure-bf16
    one; every other engine runs `precision` as given (DDP: autocast)."""
    # NB: fp16 under FSDP2 has no pure-fp16 trace here; it stays on the autocast trace
    fsdp2 = strategy in (Strategy.FSDP2, Strategy.FSDP2_HYBRID)
    return Precision.PURE_BF16 if fsdp2 and precision is Precision.BF16 else precision


def compute_bytes(precision: Precision) -> int:
    """Bytes of an element in the dtype the step computes in."""
    dtype = precision.autocast_dtype or precision.param_dtype
    return dtype.itemsize


def engine_bytes(
    strategy: Strategy, precision: Precision, units: Units, layout: Layout, offload: Offload
) -> int:
    """What the engine adds on a rank beside its share of the states (see the module doc)."""
    c = compute_bytes(precision)
    p = precision.param_dtype.itemsize
    _, _, opt_div = divisors(strategy, offload, layout)
    if strategy is Strategy.DDP:
        return 0 if layout.gpus == 1 else units.trainable * p
    if strategy in (Strategy.FSDP2, Strategy.FSDP2_HYBRID):
        gathered = c * (units.root + 2 * units.largest_block)
        # NB: reduce_dtype fp32 for the block whose gradients are reduce-scattered
        unsharded = c * units.root + (c + 4) * units.largest_block
        return gathered + unsharded
    # DeepSpeed: 16-bit params and grads (the trace's fp32 ones are halved in the replay),
    # an fp32 master shard beside the optimizer state
    master = 0 if opt_div == 0 or p == c else -(-4 * units.trainable // opt_div)
    grads16 = c * units.trainable
    reduce = min(DS_REDUCE_BUCKET * c, grads16)
    if strategy is Strategy.ZERO3:
        live = min(DS_MAX_LIVE, units.root + 2 * units.largest_block + DS_PREFETCH_BUCKET)
        return master + reduce + c * live
    return master + reduce + min(DS_ALLGATHER_BUCKET * c, grads16)


def rank_memory(
    trace: StepTrace,
    spec: TrainSpec,
    device: Device,
    strategy: Strategy,
    offload: Offload,
    layout: Layout,
    units: Units,
    traced: Precision | None = None,
) -> RankMemory:
    """Device memory per rank of `trace` (one GPU, `spec` at its micro-batch) run with
    `strategy` and `offload` over `layout`.

    `traced` is the precision `trace` was made at (default `spec.precision`); give the trace
    of `traced_precision(strategy, spec.precision)` (FSDP2 with bf16: pure bf16), whose
    parameters, gradients, optimizer state and optimizer-step copies are rescaled to
    `spec.precision`'s parameter dtype (fp32 master weights).
    """
    pdiv, gdiv, odiv = divisors(strategy, offload, layout)
    traced = traced or spec.precision
    # NB: pure bf16 -> fp32 states: every state storage twice the traced bytes
    grow = spec.precision.param_dtype.itemsize, traced.param_dtype.itemsize
    fsdp2 = strategy in (Strategy.FSDP2, Strategy.FSDP2_HYBRID)
    # NB: FSDP2's sharded gradients sit in the reduce-scatter stream's pool (see the module doc)
    side_pool = _share(units.trainable * spec.precision.param_dtype.itemsize, gdiv) if fsdp2 else 0
    if strategy in (Strategy.ZERO2, Strategy.ZERO3) and offload is Offload.OPTIMIZER:
        gdiv = 0  # NB: ZeRO-Offload keeps the fp32 gradient partition on the host
    c = compute_bytes(spec.precision)
    half = c < spec.precision.param_dtype.itemsize and strategy.deepspeed
    # NB: under FSDP2 and DeepSpeed the weights are cast by the engine, not cached by autocast
    no_cast = strategy.shards_parameters or strategy.deepspeed
    scale = _Scale(pdiv, gdiv, odiv, traced, half, grow, fsdp2, no_cast)
    sizes = _rank_sizes(trace, scale)
    result, context = gpu_memory(trace, spec, device, sizes=sizes)
    single = strategy is Strategy.DDP and layout.gpus == 1
    extra = engine_bytes(strategy, spec.precision, units, layout, offload) + side_pool
    nccl = 0 if single else nccl_bytes(layout.gpus)
    live = result.live_at_peak
    named = (
        Category.PARAMETERS,
        Category.GRADIENTS,
        Category.OPTIMIZER_STATE,
        Category.ACTIVATIONS,
    )
    shown = sum(live.get(c.value, 0) for c in named)
    host = _host_per_rank(spec, units, strategy, offload, layout) * layout.per_node
    return RankMemory(
        strategy=strategy,
        offload=offload,
        gpus=layout.gpus,
        nodes=layout.nodes,
        micro_batch=spec.batch,
        total_bytes=result.peak_reserved_bytes + context + extra + nccl,
        peak_allocated_bytes=result.peak_allocated_bytes + extra,
        parameters_bytes=live.get(Category.PARAMETERS.value, 0),
        gradients_bytes=live.get(Category.GRADIENTS.value, 0),
        optimizer_state_bytes=live.get(Category.OPTIMIZER_STATE.value, 0),
        activations_bytes=live.get(Category.ACTIVATIONS.value, 0),
        other_bytes=result.peak_reserved_bytes - shown,
        engine_bytes=extra,
        nccl_bytes=nccl,
        context_bytes=context,
        host_bytes_per_node=host,
    )


@dataclass(frozen=True, slots=True)
class _Scale:
    """How `rank_memory` rescales each traced storage (see there)."""

    pdiv: int
    gdiv: int
    odiv: int
    traced: Precision
    half: bool
    grow: tuple[int, int]
    fsdp2: bool
    no_cast: bool


def _rank_sizes(trace: StepTrace, scale: _Scale) -> list[int]:
    """Each event's bytes on one rank (kept on the trace: a search asks for the same scale on
    many layouts and devices)."""
    kept = trace.replays.get(scale)
    if kept is None:
        trace.replays[scale] = kept = _scaled(trace, scale)
    assert isinstance(kept, list)
    return kept


def _scaled(trace: StepTrace, scale: _Scale) -> list[int]:
    """`_rank_sizes`, worked out."""
    pdiv, gdiv, odiv, traced, half, grow = (
        scale.pdiv,
        scale.gdiv,
        scale.odiv,
        scale.traced,
        scale.half,
        scale.grow,
    )
    fsdp2, no_cast = scale.fsdp2, scale.no_cast
    names = trace.category_names()
    sizes = []
    # NB: the enum values read once (an Enum's `.value` is a property: slow in this loop)
    parameters, gradients = Category.PARAMETERS.value, Category.GRADIENTS.value
    optimizer_state, optimizer = Category.OPTIMIZER_STATE.value, Phase.OPTIMIZER
    for name, event in zip(names, trace.events, strict=True):
        n = event.nbytes
        if name is None:
            pass
        elif name == parameters:
            n = _share(_parameter_bytes(trace, event, traced, half, grow), pdiv)
        elif name == gradients:
            n = 0 if fsdp2 else _share(n // 2 if half else n * grow[0] // grow[1], gdiv)
        elif name == optimizer_state or event.phase is optimizer:
            # NB: optimizer-phase storages: the foreach step's copies of whole states
            n = _share(n * grow[0] // grow[1], odiv)
        elif event.op == WEIGHT_CAST and no_cast:
            n = 0
        sizes.append(n)
    return sizes


def _parameter_bytes(
    trace: StepTrace, event: Event, traced: Precision, half: bool, grow: tuple[int, int]
) -> int:
    """The bytes of a traced parameter storage at the run's dtype: DeepSpeed's 16-bit copy
    (`half`), else rescaled from the traced to the master weights' dtype (`grow`); a DPO
    reference copy keeps its own dtype (2 bytes in a pure-bf16 trace, the whole model cast)."""
    n = event.nbytes
    if event.key in trace.reference_keys:
        traced_size = 2 if traced is Precision.PURE_BF16 else trace.reference_itemsize
        return n * trace.reference_itemsize // traced_size
    return n // 2 if half else n * grow[0] // grow[1]


def _share(nbytes: int, ways: int) -> int:
    """One rank's bytes of a storage split `ways` ways (0: not on the GPU)."""
    return -(-nbytes // ways) if ways else 0


def _host_per_rank(
    spec: TrainSpec, units: Units, strategy: Strategy, offload: Offload, layout: Layout
) -> int:
    """Host RAM one rank's offloaded states take (fp32 master/params, gradients, state)."""
    if offload is Offload.NONE:
        return 0
    from trainfit.memory.states import model_states

    n = layout.per_node if strategy is Strategy.FSDP2_HYBRID else layout.gpus
    states = model_states(spec, (units.total, units.trainable))
    if offload is Offload.OPTIMIZER:
        # NB: fp32 master shard + optimizer state shard + fp32 gradient partition
        master = 4 * units.trainable
        return -(-(master + states.optimizer_state_bytes + 4 * units.trainable) // n)
    return -(-states.total() // n)
