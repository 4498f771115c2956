"""Probe cuDNN's workspaces at the convolution shapes of named accuracy cases, call by call.

    PYTHONPATH=src:. python -m benchmarks.accuracy.probe_case_convs --out DIR [--cases a,b]

Collects every convolution the case's model runs (forward hooks on a meta-device copy: input
shape, weight shape, stride, padding, groups, whether the input needs a gradient) and probes
each distinct one exactly as `probe_cudnn.py` probes its grid (one steady-state forward and
backward between marker allocations, same dtype as the case's autocast). Writes
DIR/case_convs.json in the grid's format, each row with its case and how many calls it stands
for, so `fit_cudnn_conv.py --probe FILE` reports the rules' per-call errors on it.

NB: a case probed here is no longer held out if a workspace rule is changed after reading it:
mark it in `cases.FIT`.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.accuracy.probe_cudnn import _probe_conv

# (model factory, input shape per step, dtype the convolutions run in) per probed case.
# NB: shapes as `TrainSpec` makes them: vq-ae's batch is batch x multiplier (16) patches.
CASE_INPUTS: dict[str, tuple[str, tuple[int, ...], str]] = {
    "redimnet-bf16": ("redimnet_like", (64, 1, 72, 300), "bfloat16"),
    "vq-ae-fp32": ("vq_patch_autoencoder", (128, 1, 64, 64), "float32"),
    "vq-ae-bf16-ckpt": ("vq_patch_autoencoder", (64, 1, 64, 64), "bfloat16"),
}


def case_convs(case: str) -> list[dict[str, Any]]:
    """The distinct convolutions of one case's forward, in first-call order, with counts."""
    import torch

    from trainfit.models import zoo

    factory, shape, dtype = CASE_INPUTS[case]
    model = getattr(zoo, factory)().to("meta")
    rows: list[dict[str, Any]] = []

    def hook(module: torch.nn.modules.conv._ConvNd, args: tuple[Any, ...], _: Any) -> None:
        x = args[0]
        rows.append(
            dict(
                case=case,
                kind=type(module).__name__,
                dtype=dtype,
                x=list(x.shape),
                w=list(module.weight.shape),
                stride=list(module.stride),
                padding=list(module.padding),
                groups=module.groups,
                transposed=module.transposed,
                bias=module.bias is not None,
                input_grad=bool(x.requires_grad),
            )
        )

    for m in model.modules():
        if isinstance(m, torch.nn.modules.conv._ConvNd):
            m.register_forward_hook(hook)
    model(torch.zeros(shape, device="meta"))
    counts = Counter(json.dumps(r, sort_keys=True) for r in rows)
    distinct: list[dict[str, Any]] = []
    for key, n in counts.items():
        row = json.loads(key)
        row["count"] = n
        distinct.append(row)
    return distinct


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cases", default=",".join(CASE_INPUTS))
    args = parser.parse_args()
    record: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(),
        "marks": [777, 779],
        "conv": [],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    for case in args.cases.split(","):
        for row in case_convs(case):
            if torch.cuda.is_available():
                try:
                    row["events"] = _probe_conv(torch, row)
                except Exception as exc:  # a probe row that fails is recorded, not fatal
                    row["error"] = repr(exc)
                torch.cuda.empty_cache()
            record["conv"].append(row)
    (args.out / "case_convs.json").write_text(json.dumps(record))
    print(f"{len(record['conv'])} distinct convolutions probed")


if __name__ == "__main__":
    main()
