"""Whether a consumer-Ampere refit with the family's published GEMM efficiencies has support
in its calibration rows, once the RTX 3080 BERT-large batch-2 row is set aside (its step is
mostly BertAdam's per-tensor cost, results/bert_harness.md, which no trainfit optimizer
reproduces). Calibration rows only: no held-out row is predicted here.

    python -m benchmarks.external.ampere_check   # results/ampere_check.md

Candidates, each scored on the calibration rows by fit.py's criterion (sum of |log(predicted /
measured step)|): the shipped factors (version 2, H100 GEMM efficiencies); the GEMM database's
efficiencies (geforce_gemm.py) with fit.py's two factors on the two ResNet-50 rows; the same
efficiencies with one factor, on convolutions only.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from benchmarks.external import compare, fit, geforce_gemm
from trainfit.timing import families

FAMILY = "consumer-ampere"


def _rows(cache: dict) -> list[fit.Outcome]:
    rows = [r for r in compare.time_rows() if r.family == FAMILY and r.split == "calibration"]
    return [o for o in (fit.evaluate(r, cache) for r in rows) if o.status == "ok"]


def _scored(name: str, outcomes: list[fit.Outcome], cache: dict, f: fit.Factors) -> dict:
    ratios = {
        o.row.id: round(fit._seconds(o, cache, f) / fit._measured_seconds(o.row), 4)
        for o in outcomes
    }
    resnet = [abs(math.log(v)) for k, v in ratios.items() if "resnet" in k]
    return {
        "candidate": name,
        "factor": round(f.rest, 4),
        "conv_absolute": round(f.conv, 4),
        "ratios": ratios,
        "loss_resnet_rows": round(sum(resnet), 4),
    }


def candidates() -> list[dict[str, Any]]:
    cache = compare._load_cache()
    shipped = json.loads(fit.FAMILIES_JSON.read_text())["families"][FAMILY]
    rest = shipped["device_time_factor"]
    out = [
        _scored(
            "shipped (H100 GEMM efficiencies)",
            _rows(cache),
            cache,
            fit.Factors(rest, rest * shipped["op_class_factors"]["conv"]),
        )
    ]
    original = fit.FAMILIES_JSON.read_text()
    doc = json.loads(original)
    doc["families"][FAMILY]["matmul_efficiency"] = geforce_gemm.efficiencies()[FAMILY]
    try:
        fit.FAMILIES_JSON.write_text(json.dumps(doc, indent=1) + "\n")
        families._efficiency_by_device.cache_clear()
        outcomes = _rows(cache)
        resnet = [o for o in outcomes if "resnet" in o.row.id]
        both = fit.fit_group(resnet, cache, True)
        out.append(_scored("GEMM database, two factors on the ResNet rows", outcomes, cache, both))
        parts = [fit._split(o, cache) for o in resnet]
        conv = min(
            fit.GRID, key=lambda c: sum(abs(math.log((c * cv + r) / m)) for cv, r, m in parts)
        )
        out.append(
            _scored("GEMM database, convolutions only", outcomes, cache, fit.Factors(1.0, conv))
        )
    finally:
        fit.FAMILIES_JSON.write_text(original)
        families._efficiency_by_device.cache_clear()
    return out


def render(found: list[dict[str, Any]]) -> str:
    ids = list(found[0]["ratios"])
    lines = [
        "# Consumer Ampere: refit candidates on the calibration rows",
        "",
        "Predicted / measured step time per calibration row; loss: fit.py's criterion over the "
        "two ResNet-50 rows (the BERT-large row is BertAdam-bound: results/bert_harness.md). "
        "Made by `python -m benchmarks.external.ampere_check`; no held-out row is predicted.",
        "",
        "| candidate | factor | conv (absolute) | " + " | ".join(ids) + " | loss (ResNet rows) |",
        "|---|---:|---:|" + "---:|" * len(ids) + "---:|",
    ]
    for c in found:
        cells = [c["candidate"], f"{c['factor']:.4g}", f"{c['conv_absolute']:.4g}"]
        cells += [f"{c['ratios'][i]:.3f}" for i in ids] + [f"{c['loss_resnet_rows']:.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    import __main__

    # NB: `compare trace`, run as __main__, pickled its Traced entries under that module's name
    __main__.Traced = compare.Traced  # type: ignore[attr-defined]
    found = candidates()
    (compare.RESULTS / "ampere_check.md").write_text(render(found))
    print(render(found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
