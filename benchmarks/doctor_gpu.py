"""Run `trainfit doctor` on a real machine (the GPU box) and keep what it found.

    PYTHONPATH=src python benchmarks/doctor_gpu.py OUT_DIR

Writes to OUT_DIR:
- doctor.json: the Diagnosis (`report.doctor.diagnosis_dict`), when it ran, and the raw probe
  readings the checks were made from (enough to replay them through `FakeProbe` in a test);
- doctor.txt: the terminal rendering at 120 columns, as `trainfit doctor` prints it.

Exits with the command's code: 1 when a check failed.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

from trainfit.hardware.probe import TorchProbe
from trainfit.measure.doctor import diagnose
from trainfit.report.doctor import diagnosis_dict, render_doctor_text


def _reading(fn: Any, *args: Any) -> Any:
    try:
        value = fn(*args)
    except Exception as exc:  # a recording tool: say what failed, keep going
        return {"error": f"{type(exc).__name__}: {exc}"}
    return list(value) if isinstance(value, tuple) else value


def _raw(probe: TorchProbe) -> dict[str, Any]:
    """The readings `diagnose` takes, read again after it ran (CUDA is initialised by then)."""
    count = probe.cuda_device_count()
    return {
        "torch_version": _reading(probe.torch_version),
        "cuda_version": _reading(probe.cuda_runtime_version),
        "system": _reading(probe.system),
        "cuda_device_count": count,
        "gpus": [
            {
                "properties": _reading(lambda i=i: _props(probe.cuda_properties(i))),
                "free_memory_bytes": _reading(probe.cuda_free_memory, i),
                "bf16": _reading(probe.cuda_bf16_supported, i),
            }
            for i in range(count)
        ],
        "arch_list": _reading(probe.cuda_arch_list),
        "matmul_precision": _reading(probe.float32_matmul_precision),
        "nccl_available": _reading(probe.nccl_available),
        "nccl_version": _reading(probe.nccl_version),
        "nvml_driver": _reading(probe.nvml_driver_version),
        "nvml_cuda_driver": _reading(probe.nvml_cuda_driver_version),
        "smi_driver": _reading(probe.nvidia_smi_driver_version),
        "smi_cuda": _reading(probe.nvidia_smi_cuda_version),
        "smi_gpus": _reading(probe.nvidia_smi_gpus),
        "mps_built": _reading(probe.mps_built),
        "mps_available": _reading(probe.mps_available),
        "mps_fallback": _reading(probe.env, "PYTORCH_ENABLE_MPS_FALLBACK"),
        "cuda_visible_devices": _reading(probe.env, "CUDA_VISIBLE_DEVICES"),
    }


def _props(props: Any) -> dict[str, Any]:
    return {
        "name": props.name,
        "total_memory_bytes": props.total_memory_bytes,
        "compute_capability": list(props.compute_capability),
        "multiprocessor_count": props.multiprocessor_count,
    }


def main(out_dir: str) -> int:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    probe = TorchProbe()
    started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    diagnosis = diagnose(probe)
    record = {"run_at": started, "diagnosis": diagnosis_dict(diagnosis), "raw": _raw(probe)}
    (out / "doctor.json").write_text(json.dumps(record, indent=2) + "\n")
    text = render_doctor_text(diagnosis, width=120)
    (out / "doctor.txt").write_text(text)
    print(text)
    return 0 if diagnosis.ok else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python benchmarks/doctor_gpu.py OUT_DIR")
    sys.exit(main(sys.argv[1]))
