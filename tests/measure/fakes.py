"""A CUDA card faked behind `trainfit.measure.backend.Backend` for the measure tests (the real
CUDA path runs on the GPU machine: benchmarks/measure/), and a model that fails its forward."""

from __future__ import annotations

from trainfit.hardware.catalog import DeviceKind
from trainfit.measure.backend import CpuBackend

GiB = 1 << 30
BROKEN = dict(
    model="tests.measure_models:broken_mlp", inputs=("x=B,16:float32",), device="cpu", batch=4
)


class FakeCuda(CpuBackend):
    """A CUDA card as the backend interface shows it: the steps run on the CPU, the memory
    counters are scripted (allocated grows by `per_phase` at every reading)."""

    kind = DeviceKind.CUDA

    def __init__(self, total: int = 80 * GiB, free: int = 79 * GiB, context: int = GiB // 2):
        super().__init__()
        self.total, self.free, self.context = total, free, context
        self.reads = 0

    def name(self) -> str:
        return "Fake H100"

    def allocated(self) -> int | None:
        return 100 * (1 << 20) + self.reads * (1 << 20)

    def reserved(self) -> int | None:
        return 2 * GiB

    def take_peaks(self) -> tuple[int | None, int | None, int | None]:
        self.reads += 1
        return self.allocated(), 2 * GiB, 2 * GiB + self.context

    def total_memory(self) -> int | None:
        return self.total

    def free_memory(self) -> int | None:
        return self.free
