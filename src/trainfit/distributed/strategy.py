"""How a training step is spread over GPUs: the engine (`Strategy`), what goes to host RAM
(`Offload`) and the machines (`Layout`).

Which model states each strategy shards (Rajbhandari et al., "ZeRO", SC 2020, fig. 1; PyTorch
FSDP2 `fully_shard` docs; DeepSpeed config docs):

| strategy      | parameters | gradients | optimizer state | engine            |
|---------------|------------|-----------|-----------------|-------------------|
| ddp           | replicated | replicated| replicated      | torch DDP         |
| zero1         | replicated | replicated| sharded over N  | DeepSpeed stage 1 |
| zero2         | replicated | sharded   | sharded         | DeepSpeed stage 2 |
| zero3         | sharded    | sharded   | sharded         | DeepSpeed stage 3 |
| fsdp2         | sharded    | sharded   | sharded         | torch fully_shard |
| fsdp2-hybrid  | sharded in a node, replicated across nodes (HSDP, a 2-D mesh) | torch    |

Known limitations: no tensor, pipeline, sequence or expert parallelism; every node has the
same number of GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from trainfit.errors import SpecError


class Strategy(str, Enum):
    """The data-parallel engine and how much of the model states it shards."""

    DDP = "ddp"
    FSDP2 = "fsdp2"
    FSDP2_HYBRID = "fsdp2-hybrid"
    ZERO1 = "zero1"
    ZERO2 = "zero2"
    ZERO3 = "zero3"

    @property
    def deepspeed(self) -> bool:
        """Whether DeepSpeed runs it (its memory is modelled only: DeepSpeed is not installed
        on the GPU machine trainfit is checked on)."""
        return self in (Strategy.ZERO1, Strategy.ZERO2, Strategy.ZERO3)

    @property
    def shards_parameters(self) -> bool:
        return self in (Strategy.FSDP2, Strategy.FSDP2_HYBRID, Strategy.ZERO3)


class Offload(str, Enum):
    """What the host's RAM holds instead of the GPU."""

    NONE = "none"
    OPTIMIZER = "optimizer"
    """The optimizer state and its step (DeepSpeed ZeRO-Offload, `offload_optimizer`)."""
    PARAMS = "params"
    """Parameters, gradients and optimizer state (FSDP2 `CPUOffloadPolicy`; DeepSpeed
    ZeRO-Infinity `offload_param` + `offload_optimizer`)."""


ALLOWED_OFFLOAD: dict[Strategy, tuple[Offload, ...]] = {
    Strategy.DDP: (Offload.NONE,),
    Strategy.ZERO1: (Offload.NONE, Offload.OPTIMIZER),
    Strategy.ZERO2: (Offload.NONE, Offload.OPTIMIZER),
    Strategy.ZERO3: (Offload.NONE, Offload.OPTIMIZER, Offload.PARAMS),
    # NB: FSDP2's CPUOffloadPolicy moves parameters, gradients and the optimizer step together
    Strategy.FSDP2: (Offload.NONE, Offload.PARAMS),
    Strategy.FSDP2_HYBRID: (Offload.NONE, Offload.PARAMS),
}
"""The offloads each engine offers."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Layout:
    """GPUs over machines (nodes), every node with the same count."""

    gpus: int
    """GPUs in all (the world size)."""
    nodes: int = 1
    """Machines; `gpus` is split evenly over them."""

    def __post_init__(self) -> None:
        problems = []
        if not isinstance(self.gpus, int) or self.gpus < 1:
            problems.append(f"gpus must be a positive integer, got {self.gpus!r}")
        if not isinstance(self.nodes, int) or self.nodes < 1:
            problems.append(f"nodes must be a positive integer, got {self.nodes!r}")
        elif isinstance(self.gpus, int) and self.gpus >= 1 and self.gpus % self.nodes:
            problems.append(
                f"{self.gpus} GPUs do not split evenly over {self.nodes} nodes "
                f"({self.gpus} % {self.nodes} = {self.gpus % self.nodes}): give a multiple of "
                f"{self.nodes} GPUs"
            )
        if problems:
            raise SpecError(problems)

    @property
    def per_node(self) -> int:
        return self.gpus // self.nodes

    def words(self) -> str:
        if self.nodes == 1:
            return f"{self.gpus} GPU{'s' if self.gpus > 1 else ''}"
        return f"{self.nodes} nodes x {self.per_node} GPUs = {self.gpus}"


def check_offload(strategy: Strategy, offload: Offload) -> None:
    """SpecError when `strategy` cannot offload `offload`."""
    allowed = ALLOWED_OFFLOAD[strategy]
    if offload not in allowed:
        raise SpecError(
            [
                f"--offload {offload.value} is not offered by {strategy.value} (it offers "
                f"{', '.join(o.value for o in allowed)}): pick one of those or another strategy"
            ]
        )


def check_batch(effective_batch: int, layout: Layout) -> None:
    """SpecError, with the arithmetic, when the world size does not divide the batch."""
    world = layout.gpus
    if effective_batch % world == 0:
        return
    below = effective_batch - effective_batch % world
    above = below + world
    where = (
        f"({layout.nodes} nodes x {layout.per_node} GPUs = {world})"
        if layout.nodes > 1
        else f"({world} GPUs)"
    )
    use = f"use {below} or {above}" if below > 0 else f"use {above}"
    raise SpecError([f"effective batch {effective_batch} % {where} != 0: {use}"])


def divisors(strategy: Strategy, offload: Offload, layout: Layout) -> tuple[int, int, int]:
    """How many ways (parameters, gradients, optimizer state) are each split on a GPU; 0: not
    on the GPU (offloaded)."""
    n = layout.per_node if strategy is Strategy.FSDP2_HYBRID else layout.gpus
    params, grads, opt = {
        Strategy.DDP: (1, 1, 1),
        Strategy.ZERO1: (1, 1, n),
        Strategy.ZERO2: (1, n, n),
        Strategy.ZERO3: (n, n, n),
        Strategy.FSDP2: (n, n, n),
        Strategy.FSDP2_HYBRID: (n, n, n),
    }[strategy]
    if offload is Offload.OPTIMIZER:
        opt = 0
    elif offload is Offload.PARAMS:
        params = grads = opt = 0
    return params, grads, opt
