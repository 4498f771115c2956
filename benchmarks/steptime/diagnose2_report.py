"""The tables of `diagnose2.py`'s H100 run, beside what trainfit predicts now for the same steps.

    PYTHONPATH=src:. python -m benchmarks.steptime.diagnose2_report [--no-predict]

Reads `results/diagnose2_h100/diagnose2.json` (raw rows, 3 fresh-process repeats per part) and
writes `results/diagnose2_h100.md`: per configuration the median over the repeats and the
spread ((max - min) / median). Predictions are `trainfit.estimate(device="h100")` on the same
model built live here (the rules and `host_fit.json` of the checkout that runs this), never a
figure typed in; `--no-predict` leaves them out.
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.steptime.diagnose2 import HIDDEN, LAYERS, MODES

RESULTS = Path(__file__).parent / "results"
RAW = RESULTS / "diagnose2_h100" / "diagnose2.json"
OUT = RESULTS / "diagnose2_h100.md"
HF_KINDS = ("hf", "hf-lora", "bare", "bare-lora", "mlp")


def _med(values: list[float]) -> tuple[float, float]:
    """The median and the spread ((max - min) / median) of the repeats."""
    mid = statistics.median(values)
    return mid, (max(values) - min(values)) / mid if mid else 0.0


def _line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line through the points."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    slope /= sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def _groups(record: dict[str, Any], part: str, key: Any) -> dict[Any, list[dict[str, Any]]]:
    out: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for run in record["runs"]:
        if run["part"] != part:
            continue
        for row in run["rows"]:
            if "error" not in row:
                out[key(row)].append(row)
    return out


def _rnn_predict(mode: str, dtype: str, hidden: int, layers: int) -> dict[str, float]:
    import torch

    import trainfit
    from benchmarks.faithful.models import RnnLM
    from benchmarks.steptime.cases import VOCAB

    torch.manual_seed(0)
    model = RnnLM(mode, layers, hidden=hidden, embed=128)
    tokens = torch.randint(0, VOCAB, (32, 64))
    precision = "bf16" if dtype == "bf16" else "fp32"
    step = trainfit.estimate(
        model=model, sample=tokens, batch=32, device="h100", precision=precision
    ).step_time
    assert step is not None
    return dict(
        step=step.seconds * 1e3,
        forward=step.forward_seconds * 1e3,
        backward=step.backward_seconds * 1e3,
    )


def _host_predict(kind: str, depth: int, amp: bool) -> dict[str, float]:
    """trainfit's step (and its phases) for one `hf`-part model, in microseconds."""
    import torch
    import torch.nn.functional as F

    import trainfit
    from benchmarks.steptime.diagnose2 import _build

    model, _, _ = _build(kind, depth, "cpu")
    kwargs: dict[str, Any] = dict(device="h100", precision="bf16" if amp else "fp32")
    if kind == "mlp":
        x, y = torch.randn(8, 16), torch.randint(0, 10, (8,))
        kwargs.update(sample=(x, y), loss=F.cross_entropy, batch=8, optimizer="sgd")
    else:
        ids = torch.randint(0, 512, (1, 8))
        sample = {"input_ids": ids, "labels": ids} if kind.startswith("hf") else ids
        kwargs.update(sample=sample, batch=1)
    step = trainfit.estimate(model=model, **kwargs).step_time
    assert step is not None
    return dict(
        step=step.seconds * 1e6,
        forward=step.forward_seconds * 1e6,
        backward=step.backward_seconds * 1e6,
        host_share=step.host_bound_share,
    )


def _pct(pred: float, meas: float) -> str:
    return f"{(pred / meas - 1) * 100:+.1f}%"


def rnn_tables(record: dict[str, Any], predict: bool) -> list[str]:
    groups = _groups(record, "rnn", lambda r: (r["mode"], r["dtype"], r["hidden"], r["layers"]))
    fields = ("forward_ms", "forward_host_ms", "backward_ms", "backward_host_ms", "step_ms")
    med: dict[Any, dict[str, tuple[float, float]]] = {
        key: {f: _med([r[f] for r in rows]) for f in fields} for key, rows in groups.items()
    }
    out = [
        "## rnn: one cuDNN call (layer alone) and the RnnLM step (loop-timed)",
        "",
        "Medians over the repeats (spread in brackets). fwd/bwd: CUDA-event time of the call "
        "alone after a sync; host: `perf_counter` inside the call. step: `window.windows`. "
        "Predicted: `trainfit.estimate` of the same `RnnLM` (embedding 128, AdamW, bf16 = "
        "autocast); its forward/backward include embedding, head and loss.",
        "",
        "| mode | dtype | hidden | layers | fwd ms | fwd host ms | bwd ms | bwd host ms "
        "| step ms | pred step ms | error | pred fwd | pred bwd |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    preds: dict[Any, dict[str, float]] = {}
    for key in sorted(med):
        m = med[key]
        cells = [f"{m[f][0]:.2f} ({m[f][1] * 100:.0f}%)" for f in fields]
        extra = ["", "", "", ""]
        if predict:
            preds[key] = p = _rnn_predict(*key)
            extra = [f"{p['step']:.2f}", _pct(p["step"], m["step_ms"][0])]
            extra += [f"{p['forward']:.2f}", f"{p['backward']:.2f}"]
        out.append("| " + " | ".join([*map(str, key), *cells, *extra]) + " |")
    out += [
        "",
        "Per layer: least-squares line over layers 1-4 of the medians, intercept + slope x "
        "layers (ms).",
        "",
        "| mode | dtype | hidden | fwd | fwd host | bwd | bwd host | step | pred step "
        "| pred fwd | pred bwd |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for mode in MODES:
        for dtype in ("fp32", "bf16"):
            for hidden in HIDDEN:
                keys = [(mode, dtype, hidden, n) for n in LAYERS]
                if not all(k in med for k in keys):
                    continue
                cells = []
                for f in fields:
                    a, b = _line(list(map(float, LAYERS)), [med[k][f][0] for k in keys])
                    cells.append(f"{a:.2f} + {b:.2f}")
                for which in ("step", "forward", "backward"):
                    if predict:
                        a, b = _line(list(map(float, LAYERS)), [preds[k][which] for k in keys])
                        cells.append(f"{a:.2f} + {b:.2f}")
                    else:
                        cells.append("")
                out.append("| " + " | ".join([mode, dtype, str(hidden), *cells]) + " |")
    if predict:
        signed = [(preds[k]["step"] / med[k]["step_ms"][0] - 1) * 100 for k in preds]
        errors = [abs(e) for e in signed]
        out += [
            "",
            f"Step error over the {len(errors)} configurations: median "
            f"{statistics.median(errors):.1f}%, worst {max(errors):.1f}%; "
            f"{sum(e < 0 for e in signed)} of {len(signed)} predicted under.",
        ]
    return out


def host_tables(record: dict[str, Any], predict: bool) -> list[str]:
    groups = _groups(record, "hf", lambda r: (r["model"], r["depth"], r["amp"]))
    timed = ("forward_us", "forward_backward_us", "step_us")
    out = [
        "## hf: host cost per dispatched op (batch 1, 8 tokens, width 64; MLPs batch 8)",
        "",
        "Counts are the GPU run's `TorchDispatchMode` counts (identical across repeats); "
        "ops exclude views. us/op: the phase's time over its ops + views (and over ops alone); "
        "bwd = forward_backward - forward. Medians over the repeats (spread in brackets).",
        "",
        "| model | depth | amp | fwd ops+views | modules | fwd us | fwd us/op (ops+views; ops) "
        "| us/module | bwd ops+views | bwd us | bwd us/op (ops+views; ops) | step us |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    keys = sorted(groups, key=lambda k: (HF_KINDS.index(k[0]), k[2], k[1]))
    med: dict[Any, dict[str, float]] = {}
    for key in keys:
        rows = groups[key]
        first = rows[0]
        m = {f: _med([r[f] for r in rows]) for f in timed}
        bwd = _med([r["forward_backward_us"] - r["forward_us"] for r in rows])
        fo, fv = first["forward_ops"], first["forward_views"]
        bo, bv = first["backward_ops"], first["backward_views"]
        med[key] = dict(fwd=m["forward_us"][0], bwd=bwd[0], step=m["step_us"][0])
        med[key].update(fo=fo, fv=fv, bo=bo, bv=bv, mod=first["forward_module_calls"])
        med[key]["opt_ops"] = first["optimizer_ops"]
        med[key]["tensors"] = first["trainable_tensors"]
        f_us, b_us = m["forward_us"][0], bwd[0]
        cells = [
            key[0],
            str(key[1]),
            "bf16" if key[2] else "fp32",
            f"{fo}+{fv}",
            str(first["forward_module_calls"]),
            f"{f_us:.0f} ({m['forward_us'][1] * 100:.0f}%)",
            f"{f_us / (fo + fv):.1f}; {f_us / fo:.1f}",
            f"{f_us / first['forward_module_calls']:.1f}",
            f"{bo}+{bv}",
            f"{b_us:.0f} ({bwd[1] * 100:.0f}%)",
            f"{b_us / (bo + bv):.1f}; {b_us / bo:.1f}",
            f"{m['step_us'][0]:.0f} ({m['step_us'][1] * 100:.0f}%)",
        ]
        out.append("| " + " | ".join(cells) + " |")
    out += _marginal(med)
    if predict:
        out += _host_predicted(med, keys)
    return out


def _marginal(med: dict[Any, dict[str, float]]) -> list[str]:
    """us per op added with depth: (time at the deepest - at the shallowest) / (ops added)."""
    out = [
        "",
        "Marginal cost (fp32, deepest minus shallowest depth: the per-step fixed costs cancel): "
        "us per op+view added, per op added, per module call added.",
        "",
        "| model | depths | fwd us/op+view | fwd us/op | fwd us/module | bwd us/op+view "
        "| bwd us/op |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for kind in HF_KINDS:
        depths = sorted(d for (k, d, amp) in med if k == kind and not amp)
        if len(depths) < 2:
            continue
        lo, hi = med[(kind, depths[0], False)], med[(kind, depths[-1], False)]
        df, db = hi["fwd"] - lo["fwd"], hi["bwd"] - lo["bwd"]
        cells = [
            kind,
            f"{depths[0]}->{depths[-1]}",
            f"{df / (hi['fo'] + hi['fv'] - lo['fo'] - lo['fv']):.1f}",
            f"{df / (hi['fo'] - lo['fo']):.1f}",
            f"{df / (hi['mod'] - lo['mod']):.1f}",
            f"{db / (hi['bo'] + hi['bv'] - lo['bo'] - lo['bv']):.1f}",
            f"{db / (hi['bo'] - lo['bo']):.1f}",
        ]
        out.append("| " + " | ".join(cells) + " |")
    return out


def _host_predicted(med: dict[Any, dict[str, float]], keys: list[Any]) -> list[str]:
    out = [
        "",
        "What the current `host_fit.json` implies: `trainfit.estimate` of the same model "
        "(built on the CPU from the same seed, traced by trainfit, its own op counts); the "
        "steps are host-bound (host share shown), so predicted time over the GPU-counted ops "
        "+ views is the per-op cost the fit implies for that code.",
        "",
        "| model | depth | amp | host share | pred fwd us | meas fwd us | fwd error "
        "| pred fwd us/op+view | pred bwd us | meas bwd us | bwd error "
        "| pred bwd us/op+view | pred step us | meas step us | step error |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key in keys:
        m = med[key]
        p = _host_predict(*key)
        cells = [
            key[0],
            str(key[1]),
            "bf16" if key[2] else "fp32",
            f"{p['host_share']:.2f}",
            f"{p['forward']:.0f}",
            f"{m['fwd']:.0f}",
            _pct(p["forward"], m["fwd"]),
            f"{p['forward'] / (m['fo'] + m['fv']):.1f}",
            f"{p['backward']:.0f}",
            f"{m['bwd']:.0f}",
            _pct(p["backward"], m["bwd"]),
            f"{p['backward'] / (m['bo'] + m['bv']):.1f}",
            f"{p['step']:.0f}",
            f"{m['step']:.0f}",
            _pct(p["step"], m["step"]),
        ]
        out.append("| " + " | ".join(cells) + " |")
    return out


def main() -> None:
    import json

    parser = argparse.ArgumentParser()
    parser.add_argument("--no-predict", action="store_true")
    parser.add_argument("--out", type=Path, default=OUT, help="where the tables go")
    parser.add_argument("--rnn-only", action="store_true", help="leave out the hf part")
    args = parser.parse_args()
    record = json.loads(RAW.read_text())
    env = record["environment"]
    head = [
        "# diagnose2 on the H100: multi-layer cuDNN RNN calls; host cost per op",
        "",
        f"Measured {env['date']} on {env['device']} (driver {env['nvidia_smi'].split(', ')[1]}), "
        f"torch {env['torch']}, CUDA {env['cuda']}, cuDNN {env['cudnn']}, transformers "
        f"{env['transformers']}, peft {env['peft']}; raw rows `diagnose2_h100/diagnose2.json` "
        f"({sum(1 for r in record['runs'] if r.get('rows'))} part runs, 3 repeats each). "
        "Generated by `benchmarks/steptime/diagnose2_report.py`; predictions by the checkout "
        "that generated it (no rule changed on this data).",
        "",
    ]
    body = [*rnn_tables(record, not args.no_predict), ""]
    if not args.rnn_only:
        body += host_tables(record, not args.no_predict)
    args.out.write_text("\n".join(head + body) + "\n")


if __name__ == "__main__":
    main()
