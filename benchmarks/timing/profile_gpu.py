"""Where the device time of a few accuracy-suite steps goes (torch.profiler, one GPU).

    PYTHONPATH=src:. python -m benchmarks.timing.profile_gpu --out DIR --cases a,b

For studying the step-time model's misses: per case, the aten ops by self device time and
the host time of the step (3 warm-up steps, 3 profiled). Writes DIR/profile.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks.accuracy.cases import CASES


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--cases", required=True)
    args = parser.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile

    from trainfit.measure.steps import device_rig
    from trainfit.spec import TrainSpec
    from trainfit.training import run_iteration

    out: dict[str, Any] = {}
    for name in args.cases.split(","):
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = True
        spec = TrainSpec(**CASES[name])
        dev = torch.device("cuda", 0)
        rig, _ = device_rig(spec, dev, build_on="device")
        batch = rig.program.make_batch(dev, True)
        for _ in range(3):
            run_iteration(rig, batch)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                run_iteration(rig, batch)
            torch.cuda.synchronize()
        rows = []
        for e in prof.key_averages():
            device_us = getattr(e, "self_device_time_total", 0) or 0
            if device_us <= 0 and e.self_cpu_time_total < 1000:
                continue
            rows.append(
                {
                    "op": e.key,
                    "count": e.count // 3,
                    "self_device_us": device_us / 3,
                    "self_cpu_us": e.self_cpu_time_total / 3,
                }
            )
        rows.sort(key=lambda r: -r["self_device_us"])
        out[name] = rows[:40] + sorted(rows[40:], key=lambda r: -r["self_cpu_us"])[:20]
        print(name, flush=True)
        for r in rows[:15]:
            print(f"   {r['op'][:60]:60s} x{r['count']:5d} dev {r['self_device_us']:9.1f} us")
        print("  by host time:")
        for r in sorted(rows, key=lambda r: -r["self_cpu_us"])[:12]:
            print(f"   {r['op'][:60]:60s} x{r['count']:5d} cpu {r['self_cpu_us']:9.1f} us")
        del rig, batch
        torch.cuda.empty_cache()
        Path(args.out, "profile.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
