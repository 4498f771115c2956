"""Why Lambda's BERT-large FP32 rows at batch 1-2 run 2x slower than modelled: the modelled
step broken down by kernel kind beside the steady step read off the runs' own logs, and the
excess per parameter tensor, on the small-batch rows and on runs of the same harness.

    python -m benchmarks.external.bert_harness   # results/bert_harness.{md,json}

The logs (lambdal/deeplearning-benchmark, the paths below) print a DLL line at training
iterations 1, 51 and 101; (t101 - t1) / 100 is the steady step, the first step excluded, which
the row's metric (100 steps over `e2e_train_time`) includes (the H200's: iterations 51-101).
Their FP32 runs use NVIDIA's BertAdam (each log warns at `optimization.py:150`,
`next_m.mul_(beta1).add_(1 - beta1, grad)`): a Python loop over the parameter tensors issuing
about a dozen elementwise kernels each, where the model times PyTorch's AdamW (foreach: a few
multi-tensor kernels). Their FP16 runs use apex's FusedAdam. A per-step cost per tensor does
not grow with the batch: it is most of a batch-1 step and a few percent of a batch-64 one.

BERT-base SQuAD on the RTX 3070 is not a corpus row (a diagnostic of the same machine and
container): its step is traced here from the model trainfit builds.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections import defaultdict
from datetime import datetime
from typing import Any

from benchmarks.external import compare
from benchmarks.external.load import load_corpus
from trainfit.hardware.catalog import get_device
from trainfit.spec import Precision
from trainfit.timing.constants import calibration, family_fits
from trainfit.timing.families import class_factors, op_class
from trainfit.timing.step import Rates, step_time
from trainfit.trace.costs import OpKind
from trainfit.trace.step import trace_step
from trainfit.trace.target import Target
from trainfit.training import Phase

LAMBDA = "lambdal/deeplearning-benchmark"
RUNS: tuple[dict[str, Any], ...] = (
    {
        "run": "RTX 3070 BERT-large FP32 (BertAdam)",
        "row": "lambda-3070-bert-large-squad-fp32",
        "log": "pytorch/results/3070/PyTorch_bert_large_squad_FP32/24-03-2021_08-13-24.txt",
        "commit": "51354c24219bb3f2aff246cfc4ca1874f3b6050f",
        "dll": ((1, "2021-03-24 08:13:51.902929"), (101, "2021-03-24 08:14:21.017980")),
    },
    {
        "run": "RTX 3070 BERT-base FP32 (BertAdam), batch 8: not a corpus row",
        "row": None,
        "device": "rtx-3070",
        "model": "benchmarks.external.models:bert_base_uncased_squad_nvidia",
        "batch": 8,
        "log": "pytorch/results/3070/PyTorch_bert_base_squad_FP32/24-03-2021_08-18-31.txt",
        "commit": "51354c24219bb3f2aff246cfc4ca1874f3b6050f",
        "dll": ((1, "2021-03-24 08:18:55.860013"), (101, "2021-03-24 08:19:22.018627")),
    },
    {
        "run": "RTX 3070 BERT-large FP16 apex O2 (FusedAdam), batch 2: not reproducible",
        "row": None,
        "batch": 2,
        "log": "pytorch/results/3070/PyTorch_bert_large_squad_FP16/24-03-2021_08-21-45.txt",
        "commit": "51354c24219bb3f2aff246cfc4ca1874f3b6050f",
        "dll": ((1, "2021-03-24 08:22:13.245555"), (101, "2021-03-24 08:22:25.782376")),
    },
    {
        "run": "RTX 3080 BERT-large FP32 (BertAdam)",
        "row": "lambda-3080-bert-large-squad-fp32",
        "log": "pytorch/results/3080/PyTorch_bert_large_squad_FP32/28-10-2020_05-14-39.txt",
        "commit": "e167f02cb45d83ccbc4b322dd33773e30ecfd100",
        "dll": ((1, "2020-10-28 05:15:00.526048"), (101, "2020-10-28 05:15:24.235729")),
    },
    {
        "run": "RTX 3090 BERT-large FP32 (BertAdam)",
        "row": "lambda-3090-v1-bert-large-squad-fp32",
        "log": "pytorch/results/3090_v1/PyTorch_bert_large_squad_FP32/24-10-2022_22-59-01.txt",
        "commit": "e65ebf70a0e3f50fa5c2edc6fabcc18cf6908b0c",
        "dll": ((1, "2022-10-24 22:59:34.114679"), (101, "2022-10-24 23:00:37.750885")),
    },
    {
        "run": "A10 BERT-large FP32 (BertAdam)",
        "row": "lambda-lambdacloud-a10-v1-bert-large-squad-fp32",
        "log": "pytorch/results/LambdaCloud_A10_v1/PyTorch_bert_large_squad_FP32/"
        "11-02-2023_04-57-54.txt",
        "commit": "fdc88fdb7a2e5e48011159c8b1344d6effa2366f",
        "dll": ((1, "2023-02-11 04:58:38.393952"), (101, "2023-02-11 04:59:38.634297")),
    },
    {
        "run": "H100 SXM BERT-large FP32 (BertAdam; the calibration GPU, not fitted on)",
        "row": "lambda-h100-80gb-sxm5-v1-bert-large-squad-fp32",
        "log": "pytorch/results/H100_80GB_SXM5_v1/PyTorch_bert_large_squad_FP32/"
        "14-02-2023_05-10-10.txt",
        "commit": "a8e6d619986c479ef0112cfd015f8a26b95e2759",
        "dll": ((1, "2023-02-14 05:14:08.965436"), (101, "2023-02-14 05:14:52.529527")),
    },
    {
        "run": "H100 PCIe BERT-large FP32 (BertAdam; not fitted on)",
        "row": "lambda-h100-80gb-pcie-v1-bert-large-squad-fp32",
        "log": "pytorch/results/H100_80GB_PCIe_v1/PyTorch_bert_large_squad_FP32/"
        "30-11-2022_13-15-14.txt",
        "commit": "65a7e4184a3a164d4a615a7319f0edabaf60aa46",
        "dll": ((1, "2022-11-30 13:16:00.478657"), (101, "2022-11-30 13:17:09.943136")),
    },
    {
        "run": "H200 BERT-large FP32 (BertAdam; iterations 51-101, the part of the log read)",
        "row": "lambda-lambdabm-eng04-1xh200-140gb-sxm-h200-v2-bert-large-squad-fp32",
        "log": "pytorch/results_v2/LambdaBM_ENG04_1xH200_140GB_SXM_h200_v2/"
        "PyTorch_bert_large_squad_FP32/02-08-2024_13-16-12.txt",
        "commit": "6ff92514ea5a9e7153abac4e979e5a40debc7607",
        "dll": ((51, "2024-08-02 13:17:12.116364"), (101, "2024-08-02 13:17:37.963470")),
    },
)


def steady_seconds(dll: tuple[tuple[int, str], tuple[int, str]]) -> float:
    """A step's seconds between two DLL lines (iteration, time): 1 and 101 where the stored
    log shows both."""
    (i0, t0), (i1, t1) = dll
    elapsed = datetime.fromisoformat(t1) - datetime.fromisoformat(t0)
    return elapsed.total_seconds() / (i1 - i0)


def _matmul_precision(dtype: str, spec: Any, device: Any) -> str:
    """The rate a matmul runs at (as trainfit.timing.step picks it)."""
    if dtype in ("bf16", "fp16"):
        return dtype
    return "tf32" if spec.precision is Precision.TF32 and device.has_tf32 else "fp32"


def breakdown(costs: Any, spec: Any, device: Any) -> dict[str, float]:
    """Seconds of the modelled kernels by kind (the device family's factors applied): matmul
    FLOP time, matmul fixed time, attention, memory-bound kernels, the optimizer's."""
    rates = Rates(device, spec, calibration())
    fit = family_fits().get(device.name)
    factor = fit.device_time_factor if fit else 1.0
    classes = class_factors(device.name) if fit else {}
    out: dict[str, float] = defaultdict(float)
    phases = ((Phase.FORWARD, costs.forward), (Phase.BACKWARD, costs.backward))
    for phase, indices in (*phases, (Phase.OPTIMIZER, costs.optimizer)):
        for i in indices:
            op = costs.table[i]
            scale = factor * classes.get(op_class(op.kind), 1.0)
            seconds = rates.time(op, phase).seconds * scale
            if phase is Phase.OPTIMIZER:
                out["optimizer kernels"] += seconds
            elif op.kind is OpKind.MATMUL:
                fixed = rates.matmul_fixed(_matmul_precision(op.dtype, spec, device)) * scale
                out["matmul fixed"] += fixed
                out["matmul FLOPs"] += seconds - fixed
            elif op.kind is OpKind.ATTENTION:
                out["attention"] += seconds
            else:
                out["memory-bound"] += seconds
    return dict(out)


def analyse() -> list[dict[str, Any]]:
    by_id = {r.id: r for r in load_corpus()}
    out = []
    for run in RUNS:
        steady = steady_seconds(run["dll"])
        entry: dict[str, Any] = {
            k: run[k] for k in ("run", "row", "log", "commit") if run.get(k) is not None
        }
        entry.update({"source": LAMBDA, "steady_step_s": round(steady, 4)})
        if run["row"] is None and "model" not in run:
            entry["batch"] = run["batch"]
            out.append(entry)
            continue
        if run["row"] is not None:
            row = by_id[run["row"]]
            spec, device = compare.build_spec(row), get_device(row.device_key)
            assert row.batch is not None and row.value is not None
            entry.update({"batch": row.batch, "metric_step_s": round(row.batch / row.value, 4)})
        else:
            device = get_device(run["device"])
            base = compare.build_spec(by_id[RUNS[0]["row"]])
            spec = dataclasses.replace(base, model=run["model"], batch=run["batch"])
            entry["batch"] = run["batch"]
        trace = trace_step(spec, target=Target.of(device))
        timed = step_time(
            trace.costs, spec, device, trace.tokens_per_sample, trace.trainable_tensors
        )
        excess = steady - timed.seconds
        entry.update(
            {
                "modelled_step_s": round(timed.seconds, 4),
                "modelled_by_kind_s": {
                    k: round(v, 4) for k, v in breakdown(trace.costs, spec, device).items()
                },
                "host_bound_share": round(timed.host_bound_share, 3),
                "excess_s": round(excess, 4),
                "tensors": trace.trainable_tensors,
                "excess_per_tensor_ms": round(1e3 * excess / trace.trainable_tensors, 3),
            }
        )
        out.append(entry)
    return out


def render(runs: list[dict[str, Any]]) -> str:
    lines = [
        "# Lambda's BERT SQuAD runs: modelled step by kernel kind, steady step from the logs",
        "",
        "Steady: (t(iteration 101) - t(iteration 1)) / 100 from the log's DLL lines (the "
        "H200's: iterations 51-101); metric: "
        "the corpus row's value (100 steps over e2e_train_time, first step included); excess: "
        "steady - modelled. Made by `python -m benchmarks.external.bert_harness`.",
        "",
        "| run | batch | steady ms | metric ms | modelled ms | matmul FLOPs (attention's bmm "
        "included) | matmul fixed | memory-bound | optimizer | excess ms | tensors | "
        "excess / tensor ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        kinds = r.get("modelled_by_kind_s", {})

        def ms(value: float | None) -> str:
            return "-" if value is None else f"{1e3 * value:.1f}"

        cells = [
            r["run"],
            str(r["batch"]),
            ms(r["steady_step_s"]),
            ms(r.get("metric_step_s")),
            ms(r.get("modelled_step_s")),
            *(ms(kinds.get(k)) for k in ("matmul FLOPs", "matmul fixed")),
            ms(kinds.get("memory-bound")),
            ms(kinds.get("optimizer kernels")),
            ms(r.get("excess_s")),
            str(r.get("tensors", "-")),
            "-" if "excess_per_tensor_ms" not in r else f"{r['excess_per_tensor_ms']:.3f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    runs = analyse()
    out = compare.RESULTS / "bert_harness"
    out.with_suffix(".json").write_text(json.dumps(runs, indent=1) + "\n")
    out.with_suffix(".md").write_text(render(runs))
    print(render(runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
