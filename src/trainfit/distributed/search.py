"""The smallest number of GPUs (and the engine, and the cheapest catalog instance) that holds a
job, with per-rank memory, communication and step time.

Auto: GPU counts 1, 2, 4, ... up to a machine's GPUs, then whole machines, up to MAX_GPUS
(counts that do not divide the effective batch are skipped); at each count, without and then
with gradient checkpointing, DDP, then FSDP2 hybrid (several nodes), then FSDP2 full. When
none fits, FSDP2 full with CPU offload at the fewest GPUs that hold it. `strategy`, `offload`,
`gpus` and `nodes` fix what they name. The micro-batch is the largest divisor of each rank's
share of the effective batch that fits (bisection over one trace per micro-batch tried).

Known limitations: one trace per micro-batch on one GPU, resized per rank
(`distributed.memory`); modelled, and checked only for DDP and FSDP2 on two GPUs
(benchmarks/sharded/); DeepSpeed strategies only when asked for.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from trainfit.distributed.comm import CommTime, comm_time
from trainfit.distributed.memory import (
    RankMemory,
    compute_bytes,
    rank_memory,
    traced_precision,
)
from trainfit.distributed.strategy import (
    Layout,
    Offload,
    Strategy,
    check_batch,
    check_offload,
    divisors,
)
from trainfit.distributed.units import Units, units
from trainfit.errors import SpecError, TrainfitError, check_argument
from trainfit.hardware.catalog import Device, DeviceKind, cheapest_instance, get_device, instances
from trainfit.progress import Part, tell
from trainfit.spec import Precision, TrainSpec
from trainfit.timing.missing import NoStepTime, NoTime, RateMissing, not_modelled
from trainfit.trace.kernels.attention import kernel_family, traced_alike
from trainfit.trace.step import StepTrace, trace_step
from trainfit.trace.target import Target

MAX_GPUS = 64
"""The most GPUs an automatic search tries."""


@dataclass(frozen=True, kw_only=True, slots=True)
class OffloadTime:
    """What moving an offloaded run's states over PCIe adds to each step (none hidden; the
    host's optimizer step is not timed)."""

    copies: int
    """How many times a step moves them (each micro-batch for offloaded parameters)."""
    seconds: float
    """One move's seconds."""


@dataclass(frozen=True, kw_only=True, slots=True)
class DistributedPlan:
    """How to run the job over several GPUs of one kind."""

    device: str
    strategy: Strategy
    offload: Offload
    gpus: int
    nodes: int
    precision: Precision
    checkpointing: bool
    micro_batch: int
    grad_accum: int
    memory: RankMemory
    budget_bytes: int
    """Device memory a rank may use (inside the plan's margin)."""
    comm: CommTime | None
    step_seconds: float | None
    """One optimizer step: each rank's compute over its share plus the exposed collectives
    (None when the step time is not modelled)."""
    instance: str
    """The cheapest catalog instance with `gpus` of this GPU per machine ("" when none)."""
    instances: int
    usd_per_hour: float | None
    note: OffloadTime | NoStepTime | None = None
    """The copies an offloaded run adds, or why the step time is not modelled."""
    fewer_with_offload: DistributedPlan | None = None
    """When the search chose more than one GPU without offload: the fewest GPUs that hold the
    job with FSDP2 and the states in host RAM (slower: every step moves them over PCIe)."""


TraceKey = tuple[object, ...]
"""What a step's trace depends on besides the job (`SharedTraces`): the kind of device, its
kernel family, checkpointing, the micro-batch and the precision traced."""


@dataclass(kw_only=True, slots=True)
class SharedTraces:
    """The traces and FSDP units the multi-GPU plans of one job share across its GPUs.

    NB: GPUs of one kernel family trace the same step (`kernel_family`: the only
    capability-dependent part of a CUDA trace; the allocator replay, workspaces and runtime
    context are applied per GPU), and GPUs of families whose attention kernels trace alike for
    the step share it too (`alike`), as the single-GPU plan's traces are shared
    (`trainfit.plan.traces`). Only for GPUs planned for the same job: the model, its inputs,
    optimizer and frozen parameters.
    """

    made: dict[TraceKey, StepTrace] = dataclasses.field(default_factory=dict)
    units: dict[Precision, Units] = dataclasses.field(default_factory=dict)
    """The model's FSDP units by the job's precision (the spec they are counted from)."""

    def alike(self, key: TraceKey) -> StepTrace | None:
        """A trace of the step `key` names made for another kernel family, whose every
        attention call runs the same traced op on this one's (`traced_alike`): that step's
        trace. NB: the two differ only in `StepTrace.attention` (the kernels chosen, by name),
        which no multi-GPU plan reads."""
        kind, family, *rest = key
        for (their_kind, theirs, *same), trace in self.made.items():
            if (
                their_kind is DeviceKind.CUDA
                and their_kind is kind
                and same == rest
                and traced_alike(trace.attention_calls, theirs, family)  # type: ignore[arg-type]
            ):
                return trace
        return None


@dataclass(kw_only=True, slots=True)
class _Traces:
    """Traces of one GPU's step by (checkpointing, micro-batch, precision), kept in `shared`."""

    spec: TrainSpec
    device: Device
    shared: SharedTraces = dataclasses.field(default_factory=SharedTraces)
    memories: dict[tuple[object, ...], RankMemory] = dataclasses.field(default_factory=dict)
    """Per-rank memory already worked out on this GPU (`memory` is asked again for the
    chosen micro-batch and for the offloaded alternative)."""

    def at(
        self, checkpointing: bool, micro: int, precision: Precision | None = None
    ) -> tuple[StepTrace, TrainSpec]:
        """The step at `micro` traced at `precision` (default the spec's), and the spec (at the
        spec's precision) it stands for."""
        at = dataclasses.replace(
            self.spec,
            batch=micro,
            grad_accum=1,
            checkpointing=checkpointing,
            device=self.device.name,
        )
        precision = precision or at.precision
        family = kernel_family(self.device.compute_capability)
        key = (self.device.kind, family, checkpointing, micro, precision)
        made = self.shared.made
        if key not in made:
            found = self.shared.alike(key)
            if found is None:
                traced = dataclasses.replace(at, precision=precision)
                found = trace_step(traced, target=Target.of(self.device))
            made[key] = found
        return made[key], at

    def memory(
        self, checkpointing: bool, micro: int, strategy: Strategy, offload: Offload, layout: Layout
    ) -> RankMemory:
        """Per-rank memory of the step at `micro`, traced as `strategy` really runs it."""
        key = (checkpointing, micro, strategy, offload, layout)
        if key not in self.memories:
            traced = traced_precision(strategy, self.spec.precision)
            trace, at = self.at(checkpointing, micro, traced)
            self.memories[key] = rank_memory(
                trace, at, self.device, strategy, offload, layout, self.unit_sizes(), traced
            )
        return self.memories[key]

    def unit_sizes(self) -> Units:
        found = self.shared.units.get(self.spec.precision)
        if found is None:
            found = self.shared.units[self.spec.precision] = units(self.spec)
        return found


def gpus_per_machine(device: Device) -> int:
    """The most GPUs of `device` one catalog instance has (8 when none lists it)."""
    counts = []
    for inst in instances().values():
        try:
            same = get_device(inst.gpu).name == device.name
        except TrainfitError:
            continue
        if same and inst.gpu_count.known:
            counts.append(int(inst.gpu_count.value))
    return max(counts, default=8)


def layouts(effective: int, per_machine: int, gpus: int | None, nodes: int | None) -> list[Layout]:
    """The layouts to try, fewest GPUs first."""
    if gpus is not None or nodes is not None:
        if gpus is None:
            gpus = (nodes or 1) * per_machine
        if nodes is None:
            nodes = -(-gpus // per_machine)
            while gpus % nodes:
                nodes += 1
        layout = Layout(gpus=gpus, nodes=nodes)
        check_batch(effective, layout)
        return [layout]
    found = []
    n = 1
    while n < per_machine:
        found.append(Layout(gpus=n))
        n *= 2
    found += [Layout(gpus=k * per_machine, nodes=k) for k in range(1, MAX_GPUS // per_machine + 1)]
    return [layout for layout in found if effective % layout.gpus == 0]


def plan_distributed(
    spec: TrainSpec | None = None,
    effective_batch: int | None = None,
    device: Device | str | None = None,
    margin: float = 0.10,
    strategy: Strategy | str | None = None,
    offload: Offload | str | None = None,
    gpus: int | None = None,
    nodes: int | None = None,
    shared: SharedTraces | None = None,
    *,
    sample: Any = None,
    **fields: Any,
) -> DistributedPlan | None:
    """The fewest GPUs of `device` (a CUDA GPU) that hold `spec` (its precision is used; its
    batch is replaced) for `effective_batch`, or None when none up to MAX_GPUS (or the given
    layout) does. `shared` keeps the traces for the same job's plans on other GPUs. `device`
    may be given by its catalog name, `strategy` and `offload` by their values. Or TrainSpec
    fields as keyword arguments, as `estimate` takes them: a live `nn.Module` with its
    `sample` (`plan_distributed(model=net, sample=x, effective_batch=64, device="h100")`)."""
    from trainfit.models.live import given_spec

    own = ("effective_batch", "margin", "strategy", "offload", "gpus", "nodes", "shared")
    with given_spec(
        "plan_distributed", spec, fields, sample, excluded=("batch",), parameters=own
    ) as given:
        found, strategy, offload = _checked(
            effective_batch, device, margin, strategy, offload, gpus, nodes, shared
        )
        assert effective_batch is not None  # NB: _checked raised otherwise
        return _plan_distributed(
            given, effective_batch, found, margin, strategy, offload, gpus, nodes, shared
        )


def _checked(
    effective_batch: object,
    device: object,
    margin: object,
    strategy: object,
    offload: object,
    gpus: object,
    nodes: object,
    shared: object,
) -> tuple[Device, Strategy | None, Offload | None]:
    """`plan_distributed`'s arguments checked, one line each: its device, strategy and offload."""
    name = "plan_distributed"
    check_argument(name, "effective_batch", effective_batch, int, "samples per optimizer step")
    check_argument(name, "device", device, (str, Device), "a catalog name such as 'h100'")
    check_argument(name, "margin", margin, (int, float), "the fraction kept free, e.g. 0.1")
    problems = []
    for what, value in (("effective_batch", effective_batch), ("gpus", gpus), ("nodes", nodes)):
        if value is not None:
            check_argument(name, what, value, int, "a positive count")
            if value < 1:  # type: ignore[operator]
                problems.append(f"{name}: {what} must be at least 1, got {value}")
    if not 0 <= margin < 1:  # type: ignore[operator]
        problems.append(f"{name}: margin must be a fraction in [0, 1), got {margin}")
    if problems:
        raise SpecError(problems)
    if shared is not None:
        check_argument(name, "shared", shared, SharedTraces, "SharedTraces() or None")
    from trainfit.spec import parse_enum

    chosen = None if strategy is None else parse_enum(Strategy, "strategy", strategy)  # type: ignore[arg-type]
    off = None if offload is None else parse_enum(Offload, "offload", offload)  # type: ignore[arg-type]
    found = get_device(device) if isinstance(device, str) else device
    assert isinstance(found, Device)
    return found, chosen, off  # type: ignore[return-value]


def _plan_distributed(
    spec: TrainSpec,
    effective_batch: int,
    device: Device,
    margin: float,
    strategy: Strategy | None,
    offload: Offload | None,
    gpus: int | None,
    nodes: int | None,
    shared: SharedTraces | None,
) -> DistributedPlan | None:
    if device.kind is not DeviceKind.CUDA or not device.memory_bytes:
        raise SpecError([f"device {device.name!r}: multi-GPU plans are for CUDA GPUs only"])
    if strategy is not None and offload is not None:
        check_offload(strategy, offload)
    budget = int((1.0 - margin) * device.memory_bytes)
    per_machine = gpus_per_machine(device)
    tried = layouts(effective_batch, per_machine, gpus, nodes)
    if strategy not in (None, Strategy.DDP) and gpus is None and nodes is None:
        # NB: a sharding engine asked for by name is searched from two GPUs
        tried = [layout for layout in tried if layout.gpus > 1]
    traces = _Traces(spec=spec, device=device, shared=shared or SharedTraces())
    checkpointing = (False, True) if not spec.checkpointing else (True,)
    # NB: a model with no blocks to checkpoint is planned without checkpointing
    for phase in ("on GPUs", "offload"):
        for layout in tried:
            for ckpt in checkpointing:
                for strat, off in _candidates(strategy, offload, layout, phase):
                    tell(Part.RUNG, f"{strat.value} on {layout.gpus} GPUs")
                    try:
                        one = traces.memory(ckpt, 1, strat, off, layout)
                    except SpecError:
                        if ckpt and not spec.checkpointing:
                            continue
                        raise
                    if one.total_bytes > budget:
                        continue
                    found = _finish(
                        traces, effective_batch, device, strat, off, layout, ckpt, budget
                    )
                    if phase == "offload" or strategy is not None or offload is not None:
                        return found
                    fewer = [x for x in tried if x.gpus < layout.gpus]
                    alternative = _offloaded(traces, effective_batch, device, fewer, budget)
                    return dataclasses.replace(found, fewer_with_offload=alternative)
    return None


def _offloaded(
    traces: _Traces, effective: int, device: Device, tried: list[Layout], budget: int
) -> DistributedPlan | None:
    """FSDP2 with the states offloaded on the fewest GPUs of `tried` that hold one sample
    (with gradient checkpointing)."""
    for layout in tried:
        try:
            memory = traces.memory(True, 1, Strategy.FSDP2, Offload.PARAMS, layout)
        except SpecError:
            return None
        if memory.total_bytes <= budget:
            return _finish(
                traces, effective, device, Strategy.FSDP2, Offload.PARAMS, layout, True, budget
            )
    return None


def _candidates(
    strategy: Strategy | None, offload: Offload | None, layout: Layout, phase: str
) -> list[tuple[Strategy, Offload]]:
    if strategy is not None:
        off = offload or Offload.NONE
        if phase == "offload":
            return []  # NB: a forced strategy and offload are tried once
        return [(strategy, off)]
    if phase == "offload":
        if offload is Offload.NONE:
            return []
        return [(Strategy.FSDP2, Offload.PARAMS)]
    if offload not in (None, Offload.NONE):
        return [(Strategy.FSDP2, offload)] if offload is Offload.PARAMS else []
    found = [Strategy.DDP]
    if layout.nodes > 1:
        found.append(Strategy.FSDP2_HYBRID)
    if layout.gpus > 1:
        found.append(Strategy.FSDP2)
    return [(s, Offload.NONE) for s in found]


def _finish(
    traces: _Traces,
    effective: int,
    device: Device,
    strategy: Strategy,
    offload: Offload,
    layout: Layout,
    ckpt: bool,
    budget: int,
) -> DistributedPlan:
    """The plan at the largest micro-batch that fits (a divisor of each rank's share)."""
    share = effective // layout.gpus
    options = [d for d in range(1, share + 1) if share % d == 0]
    unit_sizes = traces.unit_sizes()

    def memory(micro: int) -> RankMemory:
        return traces.memory(ckpt, micro, strategy, offload, layout)

    low, high = 0, len(options)  # options[low] fits; options[high] (if any) does not
    while high - low > 1:
        middle = (low + high) // 2
        if memory(options[middle]).total_bytes <= budget:
            low = middle
        else:
            high = middle
    micro = options[low]
    accum = share // micro
    chosen = memory(micro)
    trace, at = traces.at(ckpt, micro)
    comm, seconds, note = _timing(trace, at, device, strategy, offload, layout, accum, unit_sizes)

    name, count, price = cheapest_instance(device, layout.gpus)
    return DistributedPlan(
        device=device.name,
        strategy=strategy,
        offload=offload,
        gpus=layout.gpus,
        nodes=layout.nodes,
        precision=traces.spec.precision,
        checkpointing=ckpt,
        micro_batch=micro,
        grad_accum=accum,
        memory=chosen,
        budget_bytes=budget,
        comm=comm,
        step_seconds=seconds,
        instance=name,
        instances=count,
        usd_per_hour=price,
        note=note,
    )


def _timing(
    trace: StepTrace,
    at: TrainSpec,
    device: Device,
    strategy: Strategy,
    offload: Offload,
    layout: Layout,
    accum: int,
    unit_sizes: Units,
) -> tuple[CommTime | None, float | None, OffloadTime | NoStepTime | None]:
    """Collectives and one optimizer step's seconds on a rank (compute + exposed comm)."""
    from trainfit.timing.step import step_time

    if trace.costs is None:
        return None, None, NoStepTime(why=NoTime.NO_OP_COSTS)
    try:
        one = step_time(
            trace.costs,
            dataclasses.replace(at, grad_accum=accum),
            device,
            trace.tokens_per_sample,
            trace.trainable_tensors,
        )
    except (RateMissing, SpecError) as exc:
        return None, None, not_modelled(exc)
    _, _, odiv = divisors(strategy, offload, layout)
    # NB: a sharded optimizer steps over its shard only; an offloaded one on the host (its
    # time there is not modelled)
    optimizer = one.optimizer_seconds / odiv if odiv else 0.0
    compute = one.seconds - one.optimizer_seconds + optimizer
    c = compute_bytes(at.precision)
    reduce = at.precision.param_dtype.itemsize
    if strategy.deepspeed:
        reduce = c  # NB: DeepSpeed reduces 16-bit gradients
    elif strategy.shards_parameters:
        reduce = 4  # NB: the FSDP2 template's MixedPrecisionPolicy(reduce_dtype=fp32)
    comm = comm_time(
        strategy,
        layout,
        device,
        unit_sizes.total - unit_sizes.reference // 2,  # NB: a DPO reference: gathered once
        unit_sizes.trainable * reduce,
        c,
        accum,
        accum * (one.forward_seconds + one.backward_seconds),
    )
    moved = _offload_seconds(device, offload, unit_sizes, divisors(strategy, Offload.NONE, layout))
    note = (
        None
        if offload is Offload.NONE
        else OffloadTime(copies=accum if offload is Offload.PARAMS else 1, seconds=moved)
    )
    if offload is Offload.PARAMS:
        moved *= accum
    return comm, compute + comm.exposed_seconds + moved, note


def _offload_seconds(
    device: Device, offload: Offload, unit_sizes: Units, shards: tuple[int, int, int]
) -> float:
    """Host-device copies of one rank's offloaded states (PCIe x16 of the catalog's
    generation, gen 4 when unknown; none hidden).

    NB: params: the fp32 parameter shard in (forward and again in backward) and the fp32
    gradient shard out, per micro-batch (FSDP2 CPUOffloadPolicy); optimizer: the 16-bit
    gradient partition out and the 16-bit parameters back, per optimizer step (ZeRO-Offload).
    """
    from trainfit.timing.run import PCIE_GBS

    if offload is Offload.NONE:
        return 0.0
    gen = device.pcie_gen.value
    link = PCIE_GBS.get(int(gen), PCIE_GBS[4]) if gen else PCIE_GBS[4]
    pdiv, gdiv, odiv = shards
    if offload is Offload.PARAMS:
        volume = (2 * 4 * unit_sizes.total) / pdiv + 4 * unit_sizes.trainable / gdiv
    else:
        volume = 2 * unit_sizes.trainable / max(gdiv, 1) + 2 * unit_sizes.total / max(odiv, 1)
    return volume / (link * 1e9)
