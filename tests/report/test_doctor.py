"""`trainfit.report.doctor`: the diagnosis as JSON and as the rendered table."""

from __future__ import annotations

import json

from tests.measure.doctor_boxes import H100_TOTAL, GiB, _h100, _h100_box
from trainfit.hardware.probe import FakeProbe
from trainfit.measure.doctor import diagnose
from trainfit.report.doctor import diagnosis_dict, render_doctor_text


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines()]


def test_to_dict_is_json_ready() -> None:
    data = json.loads(json.dumps(diagnosis_dict(diagnose(_h100_box(gpus=(_h100(free=10 * GiB),))))))
    assert data["ok"] is True
    assert data["gpus"] == [
        {
            "index": 0,
            "name": "NVIDIA H100 80GB HBM3",
            "total_memory_bytes": H100_TOTAL,
            "free_memory_bytes": 10 * GiB,
            "compute_capability": [9, 0],
            "bf16": True,
        }
    ]
    assert data["checks"][3]["name"] == "cuda:0 memory"
    assert data["checks"][3]["status"] == "warn"
    assert data["steps"][1] == {
        "device": "cuda:0",
        "bf16_autocast": True,
        "loss": 1.3863,
        "params_changed": True,
        "seconds": 0.002,
    }


def test_render_healthy_h100() -> None:
    assert _lines(render_doctor_text(diagnose(_h100_box()))) == RENDERED_H100


def test_render_cpu_only_wheel() -> None:
    probe = FakeProbe(
        version="2.11.0+cpu",
        smi_gpus=("NVIDIA GeForce RTX 4060",),
        smi_driver="570.86.10",
        smi_cuda="12.8",
    )
    assert _lines(render_doctor_text(diagnose(probe))) == RENDERED_CPU_WHEEL


RENDERED_H100 = [
    "torch 2.11.0+cu130, CUDA 13.0, driver 580.159.04 (CUDA 13.0), NCCL 2.27.7",
    "                                          trainfit doctor",
    "     ┃ check          ┃ result",
    "━━━━━╇━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━",
    "ok   │ torch          │ torch 2.11.0+cu130, built with CUDA 13.0",
    "ok   │ cuda           │ torch sees 1 CUDA GPU(s)",
    "ok   │ driver         │ driver 580.159.04 supports CUDA up to 13.0 (NVML); torch is built with CUDA",  # noqa: E501
    "     │                │ 13.0: they agree",
    "ok   │ cuda:0 memory  │ NVIDIA H100 80GB HBM3, 79.18 GiB total, 78.66 GiB free",
    "ok   │ cuda:0 kernels │ sm_90: this torch has kernels for it",
    "skip │ mps            │ not a Mac (Linux)",
    "skip │ mps fallback   │ not a Mac",
    "ok   │ bf16           │ native bf16 on every GPU",
    "ok   │ tf32           │ supported on every GPU; off for fp32 matmuls (precision 'highest';",
    "     │                │ torch.set_float32_matmul_precision('high') turns it on)",
    "ok   │ nccl           │ NCCL 2.27.7",
    "ok   │ step cpu       │ MLP forward+backward+AdamW, fp32, 2.0 ms: loss 1.3863 finite, parameters",  # noqa: E501
    "     │                │ updated",
    "ok   │ step cuda:0    │ MLP forward+backward+AdamW, bf16 autocast, 2.0 ms: loss 1.3863 finite,",  # noqa: E501
    "     │                │ parameters updated",
    "12 checks: 10 ok, 0 warnings, 0 failed, 2 skipped -> the stack works",
]
RENDERED_CPU_WHEEL = [
    "torch 2.11.0+cpu, no CUDA build, driver 570.86.10 (CUDA 12.8)",
    "                                          trainfit doctor",
    "     ┃ check        ┃ result",
    "━━━━━╇━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━",
    "ok   │ torch        │ torch 2.11.0+cpu, no CUDA in this build",
    "FAIL │ cuda         │ torch 2.11.0+cpu is a CPU-only build, but nvidia-smi sees 1 GPU(s): NVIDIA",  # noqa: E501
    "     │              │ GeForce RTX 4060",
    "skip │ driver       │ torch is not built with CUDA",
    "skip │ mps          │ not a Mac (Linux)",
    "skip │ mps fallback │ not a Mac",
    "skip │ bf16         │ no CUDA GPU",
    "skip │ tf32         │ no CUDA GPU",
    "skip │ nccl         │ no CUDA GPU",
    "ok   │ step cpu     │ MLP forward+backward+AdamW, fp32, 2.0 ms: loss 1.3863 finite, parameters",  # noqa: E501
    "     │              │ updated",
    "to fix:",
    "cuda: install a CUDA build of torch: pip install --force-reinstall torch --index-url",
    "      https://download.pytorch.org/whl/cu128 (none for your torch release?",
    "      https://pytorch.org/get-started/previous-versions/ lists each release's indexes)",
    "9 checks: 2 ok, 0 warnings, 1 failed, 6 skipped -> the stack is broken; fix the failures above",  # noqa: E501
]
