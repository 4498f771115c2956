"""What the host spends issuing a step's ops: per op, by its kind and phase, at the
calibration's measured costs (inference) or the host floor fitted on training steps
(`HostFit`)."""

from __future__ import annotations

from collections.abc import Sequence

from trainfit.timing.constants import Calibration
from trainfit.trace.costs import OpCost, OpKind
from trainfit.training import Phase


def host_costs(cal: Calibration, kinds: list[OpKind], phase: Phase, per_op: float) -> list[float]:
    """Host seconds to issue each op of the table in `phase` at the microbenchmarks' costs
    (inference): `per_op` for an op, the module call's cost for a module call, plus cuDNN's
    extra for convolutions and BatchNorm."""
    extra = cal.host_library_extra_seconds
    side = "backward" if phase is Phase.BACKWARD else "forward"
    by_kind = {
        OpKind.MODULE: cal.host_module_call_seconds,
        OpKind.CONV: per_op + (extra[f"conv_{side}"] if phase is not Phase.OPTIMIZER else 0.0),
        OpKind.NORM: per_op + (extra[f"norm_{side}"] if phase is not Phase.OPTIMIZER else 0.0),
    }
    return [by_kind.get(kind, per_op) for kind in kinds]


def step_host_costs(
    cal: Calibration, ops: Sequence[OpCost], phase: Phase, per_op: float
) -> list[float]:
    """Host seconds to issue each op of a training step's table in `phase`.

    In the optimizer: `per_op` for an op, the module call's cost for a module call. In forward
    and backward, the fitted host floor (`HostFit`): a forward op costs more when it records an
    autograd node; a backward op its own cost; an op without a kernel the cost of a view; a
    module call its own; convolutions and BatchNorm add cuDNN's measured extra (times a fitted
    scale), a recurrent layer the fitted cost of a cuDNN RNN call."""
    if phase is Phase.OPTIMIZER:
        return [cal.host_module_call_seconds if op.kind is OpKind.MODULE else per_op for op in ops]
    fit = cal.host_fit
    extra = cal.host_library_extra_seconds
    side = "backward" if phase is Phase.BACKWARD else "forward"
    library = {
        OpKind.CONV: extra[f"conv_{side}"] * fit.library_scale,
        OpKind.NORM: extra[f"norm_{side}"] * fit.library_scale,
        OpKind.RNN: fit.rnn_call_seconds,
    }
    out = []
    for op in ops:
        if op.kind is OpKind.MODULE:
            out.append(fit.module_seconds)
        elif op.kind is OpKind.HOST:
            out.append(fit.backward_view_seconds if phase is Phase.BACKWARD else fit.view_seconds)
        elif phase is Phase.BACKWARD:
            out.append(fit.backward_op_seconds + library.get(op.kind, 0.0))
        else:
            issue = fit.graph_op_seconds if op.graph else fit.op_seconds
            out.append(issue + library.get(op.kind, 0.0))
    return out
