"""Find each case's real largest micro-batch on a CUDA GPU, by search around the prediction.

    PYTHONPATH=src:. python -m benchmarks.max_batch.bisect_gpu --out DIR [--cases a,b]
        [--deadline 510] [--case-budget 80] [--attempt-timeout 120]

A micro-batch *fits* when three training steps complete without running out of memory
(`trainfit.measure.steps.measure(spec, steps=3, warmup=0)`, the model built as the accuracy harness
builds it: on the CPU in fp32, moved to the GPU, allocator defaults, no `empty_cache`). Every
attempt runs in a fresh Python process, so that no allocator state, cached block or library
handle carries over from one batch to the next. To save the import time, the next process is
started while the current one runs and waits, having imported torch and transformers but not
touched the GPU, for its batch on stdin (`--worker`); each record keeps the memory other
processes held on the card when the attempt began (`baseline_used_bytes`), which shows that the
waiting process held none.

The search per case: the predicted maximum p (`results/predicted.json`), then p + 1 if p fits
or p - 1 if not; then steps of max(2, 2% of p), doubling, away from p until the answer flips;
then bisection. Out of memory is `torch.OutOfMemoryError` anywhere in the attempt, or a
library's allocation failure (cuBLAS/cuDNN `ALLOC_FAILED`); any other error stops the case.

`--resume FILE` takes the attempts of an earlier bisect.json as known (copied into the new
record, marked `from_earlier_run`), so that a case cut short goes on where it stopped.

Writes DIR/bisect.json after every attempt (environment, per case the attempts and the bounds
found), so that a run stopped by its time limit keeps what it measured. A case stops starting
attempts after `--case-budget` seconds and the run after `--deadline` seconds; a case so cut
short is reported with the bounds it reached.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.accuracy.measure_gpu import nvidia_smi
from benchmarks.max_batch.cases import CASES

PREDICTED = Path(__file__).parent / "results" / "predicted.json"
RESULT_TAG = "RESULT "
OOM_MARKERS = ("out of memory", "ALLOC_FAILED")
"""Substrings of a RuntimeError that mean a library could not allocate device memory."""


# ---------------------------------------------------------------------------------------------
# One attempt, in a worker process
# ---------------------------------------------------------------------------------------------


def _worker() -> None:
    """Import everything, say ready, then run the one attempt read from stdin."""
    import torch
    import transformers  # noqa: F401  (imported ahead of the job: that is the point)

    from benchmarks.accuracy.measure_gpu import measurement_record
    from trainfit.errors import MeasureError
    from trainfit.measure.steps import measure
    from trainfit.spec import TrainSpec

    print("ready", flush=True)
    job = json.loads(sys.stdin.readline())
    started = time.perf_counter()
    record: dict[str, Any] = {"batch": job["batch"]}
    try:
        spec = TrainSpec(**CASES[job["case"]], batch=job["batch"])
        m = measure(spec, steps=3, warmup=0, device="cuda")
        full = measurement_record(m)
        assert m.peak_phase is not None
        record.update(
            status="ok",
            peak_reserved_bytes=m.peak_reserved_bytes,
            peak_allocated_bytes=m.peak_allocated_bytes,
            device_used_bytes=full["device_used_bytes"],
            baseline_used_bytes=full["baseline_used_bytes"],
            peak_phase=f"{m.peak_phase.phase.value} (iteration {m.peak_phase.iteration})",
            step_seconds=[round(s, 3) for s in m.step_seconds],
        )
    except (MeasureError, torch.OutOfMemoryError, RuntimeError) as exc:
        cause = exc.__cause__ if isinstance(exc, MeasureError) else exc
        text = f"{exc}" + (f" <- {cause}" if cause is not exc and cause is not None else "")
        is_oom = isinstance(cause, torch.OutOfMemoryError) or any(
            marker in text for marker in OOM_MARKERS
        )
        record.update(status="oom" if is_oom else "error", message=text[:900])
        if torch.cuda.is_initialized():
            free, total = torch.cuda.mem_get_info()
            record.update(
                reserved_at_failure_bytes=torch.cuda.memory_reserved(),
                allocated_at_failure_bytes=torch.cuda.memory_allocated(),
                device_used_at_failure_bytes=total - free,
                segments_at_failure=_segments(),
            )
    record["seconds"] = round(time.perf_counter() - started, 2)
    if torch.cuda.is_initialized():
        props = torch.cuda.get_device_properties(0)
        record.update(
            device=props.name,
            total_memory_bytes=props.total_memory,
            cudnn=torch.backends.cudnn.version(),
        )
    print(RESULT_TAG + json.dumps(record), flush=True)


def _segments() -> list[list[int]]:
    """Per allocator segment: [size, allocated, largest free block], large pool only."""
    import torch

    rows = []
    for seg in torch.cuda.memory_snapshot():
        if seg["segment_type"] != "large":
            continue
        free = [b["size"] for b in seg["blocks"] if b["state"] == "inactive"]
        rows.append([seg["total_size"], seg["allocated_size"], max(free, default=0)])
    return sorted(rows, reverse=True)


class _Standby:
    """A worker process started ahead of time, waiting for its job."""

    def __init__(self) -> None:
        cmd = [sys.executable, "-m", "benchmarks.max_batch.bisect_gpu", "--worker"]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )

    def run(self, case: str, batch: int, timeout: float) -> dict[str, Any]:
        started = time.perf_counter()
        if self.proc.stdout is None:
            raise RuntimeError("the worker was started without a stdout pipe")
        ready = self.proc.stdout.readline()  # blocks until the imports are done
        waited = time.perf_counter() - started
        if ready.strip() != "ready":
            _, err = self.proc.communicate()
            return {"batch": batch, "status": "error", "message": f"worker: {err[-900:]}"}
        try:
            out, err = self.proc.communicate(
                json.dumps({"case": case, "batch": batch}) + "\n", timeout=timeout
            )
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            return {"batch": batch, "status": "timeout", "seconds": round(timeout, 1)}
        lines = [ln for ln in out.splitlines() if ln.startswith(RESULT_TAG)]
        if not lines:
            return {
                "batch": batch,
                "status": "error",
                "message": f"exit {self.proc.returncode}: {err[-900:]}",
                "seconds": round(time.perf_counter() - started, 1),
            }
        record: dict[str, Any] = json.loads(lines[-1][len(RESULT_TAG) :])
        record["waited_for_imports_seconds"] = round(waited, 2)
        return record

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


# ---------------------------------------------------------------------------------------------
# The search, in the parent (which never touches the GPU)
# ---------------------------------------------------------------------------------------------


class _Run:
    def __init__(
        self,
        out: Path,
        deadline: float,
        case_budget: float,
        timeout: float,
        earlier: dict[str, Any],
    ) -> None:
        self.out = out
        self.earlier = earlier
        self.deadline = deadline
        self.case_budget = case_budget
        self.timeout = timeout
        self.started = time.perf_counter()
        self.standby = _Standby()
        self.results: dict[str, Any] = {"environment": _environment(), "cases": {}}

    def attempt(self, case: str, batch: int) -> dict[str, Any]:
        worker, self.standby = self.standby, _Standby()
        record = worker.run(case, batch, self.timeout)
        record["at_seconds"] = round(time.perf_counter() - self.started, 1)
        return record

    def save(self) -> None:
        self.results["elapsed_seconds"] = round(time.perf_counter() - self.started, 1)
        tmp = self.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.results, indent=1) + "\n")
        tmp.replace(self.out)

    def search(self, case: str, predicted: int) -> None:
        row: dict[str, Any] = {"predicted_max": predicted, "attempts": []}
        self.results["cases"][case] = row
        case_start = time.perf_counter()
        known: dict[int, dict[str, Any]] = {
            a["batch"]: a
            for a in self.earlier.get(case, {}).get("attempts", [])
            if a["status"] in ("ok", "oom")
        }
        last_seconds = 30.0

        def fits(batch: int) -> bool | None:
            nonlocal last_seconds
            if batch in known:  # measured by an earlier run (--resume): not tried again
                row["attempts"].append(known[batch] | {"from_earlier_run": True})
                return known[batch]["status"] == "ok"
            now = time.perf_counter()
            if now - case_start > self.case_budget:
                row["stopped"] = f"case budget of {self.case_budget:.0f}s spent"
                return None
            if now - self.started + last_seconds > self.deadline:
                row["stopped"] = f"run deadline of {self.deadline:.0f}s reached"
                return None
            record = self.attempt(case, batch)
            row["attempts"].append(record)
            last_seconds = max(float(record.get("seconds", 30.0)), 5.0)
            print(
                f"{case} b={batch}: {record['status']} "
                f"reserved {record.get('peak_reserved_bytes', 0) / 2**30:.2f} GiB "
                f"used {record.get('device_used_bytes', 0) / 2**30:.2f} GiB "
                f"({record.get('seconds', '?')}s)",
                flush=True,
            )
            self.save()
            if record["status"] in ("ok", "oom"):
                return record["status"] == "ok"
            row["stopped"] = f"attempt at {batch} ended in {record['status']}"
            return None

        low, high = _bounds(max(predicted, 1), fits)
        row["fits_at"] = low
        row["fails_at"] = high
        row["real_max"] = low if high is not None and low is not None and high == low + 1 else None
        row["case_seconds"] = round(time.perf_counter() - case_start, 1)
        self.save()

    def close(self) -> None:
        self.standby.close()


def _bounds(start: int, fits: Any) -> tuple[int | None, int | None]:
    """(largest batch seen to fit, smallest seen to fail); stops early when `fits` says None."""
    low: int | None = None  # largest known to fit
    high: int | None = None  # smallest known to fail
    answer = fits(start)
    if answer is None:
        return low, high
    step = max(2, math.ceil(0.02 * start))
    if answer:
        low = start
        probe = start + 1
        while high is None:
            answer = fits(probe)
            if answer is None:
                return low, high
            if answer:
                low, probe, step = probe, probe + step, step * 2
            else:
                high = probe
    else:
        high = start
        probe = start - 1
        while low is None:
            if probe < 1:
                return 0, high  # not even one sample fits
            answer = fits(probe)
            if answer is None:
                return low, high
            if answer:
                low = probe
            else:
                high, probe, step = probe, probe - step, step * 2
                probe = max(probe, 1) if high > 1 else 0
    while high - low > 1:
        middle = (low + high) // 2
        answer = fits(middle)
        if answer is None:
            break
        if answer:
            low = middle
        else:
            high = middle
    return low, high


def _environment() -> dict[str, Any]:
    """What the parent can say without touching the GPU (the workers add the device)."""
    import torch
    import transformers

    env: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "transformers": transformers.__version__,
        "python": sys.version.split()[0],
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
    }
    env["nvidia_smi"] = nvidia_smi()
    return env


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--cases", default="")
    parser.add_argument("--predicted", type=Path, default=PREDICTED)
    parser.add_argument("--deadline", type=float, default=510.0)
    parser.add_argument("--case-budget", type=float, default=80.0)
    parser.add_argument("--attempt-timeout", type=float, default=120.0)
    parser.add_argument("--resume", type=Path, help="an earlier bisect.json whose attempts count")
    args = parser.parse_args()
    if args.worker:
        _worker()
        return
    if args.out is None:
        parser.error("--out DIR is required")
    args.out.mkdir(parents=True, exist_ok=True)
    predicted = json.loads(args.predicted.read_text())["cases"]
    names = [n for n in args.cases.split(",") if n] or [n for n in CASES if n in predicted]
    earlier = json.loads(args.resume.read_text())["cases"] if args.resume else {}
    run = _Run(
        args.out / "bisect.json", args.deadline, args.case_budget, args.attempt_timeout, earlier
    )
    try:
        for name in names:
            if time.perf_counter() - run.started > args.deadline - 10:
                print(f"{name}: not started (deadline)", flush=True)
                continue
            run.search(name, predicted[name]["predicted_max"])
            row = run.results["cases"][name]
            print(
                f"== {name}: predicted {row['predicted_max']}, real {row['real_max']} "
                f"(fits {row['fits_at']}, fails {row['fails_at']}) {row['case_seconds']}s",
                flush=True,
            )
    finally:
        run.close()
        run.save()


if __name__ == "__main__":
    main()
