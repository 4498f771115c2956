"""The host CPU's features for training: SIMD width, clock, cores, and whether bf16 and fp16
matrix multiplies run natively, converted to fp32, or emulated in PyTorch's reference kernels.

`cpu_features(probe)` reads the host through a `Probe` (a `FakeProbe` in tests): on Linux the
"flags" line of /proc/cpuinfo (x86) or its "Features" line (Arm), and "cpu MHz"; on macOS
`sysctl machdep.cpu.features` and `machdep.cpu.leaf7_features` (Intel) or the
`hw.optional.arm.FEAT_*` keys (Apple silicon), and `hw.cpufrequency` where it exists.

How PyTorch's CPU matmul runs a half-precision dtype (torch 2.x, `at::native::mkldnn`
device checks, as measured on the calibration host, see `trainfit.timing.cpu`):
- bf16 goes to oneDNN when the CPU has AVX-512 BW, VL and DQ (x86) or BF16 (Arm); oneDNN uses
  hardware bf16 dot products with avx512_bf16 or amx_bf16 (`HalfSupport.NATIVE`) and converts
  to fp32 inside AVX-512 registers otherwise (`HalfSupport.CONVERTED`, about the fp32 rate).
- fp16 goes to oneDNN only with avx512_fp16 or amx_fp16 (x86) or fp16 arithmetic (Arm:
  `fphp`/`asimdhp`, FEAT_FP16).
- Everything else runs PyTorch's reference GEMM, element by element in fp32
  (`HalfSupport.EMULATED`): about 1 GFLOP/s on the calibration host, 100 times slower than
  its fp32 GEMM.

Known limitations: the peak FLOP/s formula counts two FMA units per core at the widest SIMD
width the flags name; AMD Zen 4 runs AVX-512 as two 256-bit halves and some Intel parts have
one 512-bit FMA unit, so the formula overstates their peak by 2x (the step-time model's
efficiencies are measured on a Zen 4, so hosts of the other kind are predicted too fast by up
to 2x). "cpu MHz" is the clock the kernel last saw (turbo and power states move it); Arm
Linux and Apple silicon report none, and then no peak is computed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from trainfit.hardware.probe import Probe, TorchProbe


class HalfSupport(str, Enum):
    """How the host's PyTorch runs a matrix multiply in bf16 or fp16."""

    NATIVE = "native"
    """Hardware dot products in the dtype (oneDNN)."""
    CONVERTED = "converted"
    """oneDNN converts to fp32 in AVX-512 registers: about the fp32 rate."""
    EMULATED = "emulated"
    """PyTorch's reference GEMM, element by element: tens to hundreds of times slower."""

    def __str__(self) -> str:
        return self.value


NATIVE_FLAGS: dict[str, tuple[str, ...]] = {
    "bf16": ("avx512_bf16", "amx_bf16", "bf16"),
    "fp16": ("avx512_fp16", "amx_fp16", "fphp", "asimdhp"),
}
"""Per dtype, the feature flags (Linux /proc/cpuinfo spelling; macOS's are mapped to it) any
one of which makes its matmul native. `bf16`, `fphp` and `asimdhp` are Arm's."""

CONVERTING_FLAGS = ("avx512bw", "avx512vl", "avx512dq")
"""All three let oneDNN take bf16 (converted to fp32) where no native flag is present."""

_SIMD_LANES = (("avx512f", 16), ("avx2", 8), ("avx", 8), ("asimd", 4), ("neon", 4), ("sse2", 4))
"""fp32 lanes of the widest vector unit each flag names, widest first."""

FMA_UNITS = 2
"""FMA units per core assumed by the peak formula (see Known limitations)."""

_MAC_ARM_KEYS = {
    "hw.optional.arm.FEAT_BF16": "bf16",
    "hw.optional.arm.FEAT_FP16": "fphp",
    "hw.optional.AdvSIMD": "asimd",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class CpuFeatures:
    """What the host CPU offers a training step."""

    model: str | None
    """The CPU's name ("model name" of /proc/cpuinfo, `machdep.cpu.brand_string`)."""
    cores: int | None
    """Cores this process may use (affinity), else logical cores; None where unknown."""
    threads: int
    """`torch.get_num_threads()`: how many cores PyTorch's kernels use."""
    clock_mhz: float | None
    """The clock the OS reports, None where it reports none."""
    flags: frozenset[str]
    """Feature flags, lower case, in Linux's /proc/cpuinfo spelling."""
    source: str
    """Where the flags were read."""

    def has(self, flag: str) -> bool:
        return flag in self.flags

    def half_support(self, dtype: str) -> HalfSupport:
        """How a `dtype` ("bf16" or "fp16") matmul runs here (see the module docstring)."""
        if dtype not in NATIVE_FLAGS:
            raise ValueError(f"half_support takes 'bf16' or 'fp16', got {dtype!r}")
        if any(self.has(f) for f in NATIVE_FLAGS[dtype]):
            return HalfSupport.NATIVE
        if dtype == "bf16" and all(self.has(f) for f in CONVERTING_FLAGS):
            return HalfSupport.CONVERTED
        return HalfSupport.EMULATED

    @property
    def simd_lanes(self) -> int | None:
        """fp32 lanes of the widest SIMD unit the flags name; None when none is named."""
        return next((lanes for flag, lanes in _SIMD_LANES if self.has(flag)), None)

    @property
    def peak_fp32_flops(self) -> float | None:
        """threads x fp32 lanes x FMA units x 2 FLOPs x clock; None when a factor is unknown."""
        lanes = self.simd_lanes
        if lanes is None or self.clock_mhz is None:
            return None
        return self.threads * lanes * FMA_UNITS * 2 * self.clock_mhz * 1e6


def cpu_features(probe: Probe | None = None) -> CpuFeatures:
    """The host CPU's features, read through `probe` (the real host by default)."""
    probe = probe or TorchProbe()
    usable = probe.usable_cpu_count() or probe.cpu_count()
    if probe.system() == "Darwin":
        flags, clock, model = _darwin(probe)
        source = "sysctl"
    else:
        flags, clock, model = _cpuinfo(probe.cpuinfo() or "")
        source = "/proc/cpuinfo" if flags else "none found"
    return CpuFeatures(
        model=model,
        cores=usable,
        threads=probe.torch_threads(),
        clock_mhz=clock,
        flags=flags,
        source=source,
    )


def _cpuinfo(text: str) -> tuple[frozenset[str], float | None, str | None]:
    """Flags, clock and model of the first processor in /proc/cpuinfo's text."""
    flags: frozenset[str] = frozenset()
    clock = model = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("flags", "Features") and not flags:
            flags = frozenset(value.lower().split())
        elif key == "cpu MHz" and clock is None:
            try:
                clock = float(value)
            except ValueError:
                clock = None
        elif key == "model name" and model is None and value.strip():
            model = value.strip()
    return flags, clock, model


def _darwin(probe: Probe) -> tuple[frozenset[str], float | None, str | None]:
    """Flags, clock and model from sysctl (Intel Macs name features, Apple silicon has keys)."""
    flags: set[str] = set()
    for key in ("machdep.cpu.features", "machdep.cpu.leaf7_features"):
        flags.update(_mac_flag(word) for word in (probe.sysctl(key) or "").split())
    for key, flag in _MAC_ARM_KEYS.items():
        if (probe.sysctl(key) or "").strip() == "1":
            flags.add(flag)
    hertz = probe.sysctl("hw.cpufrequency")
    clock = int(hertz) / 1e6 if hertz and hertz.isdigit() else None
    return frozenset(flags), clock, probe.sysctl("machdep.cpu.brand_string")


def _mac_flag(word: str) -> str:
    """macOS's spelling of an x86 flag in Linux's ("AVX512BW" -> "avx512bw", "AVX1.0" -> "avx",
    "SSE4.1" -> "sse4_1")."""
    word = word.lower()
    return "avx" if word == "avx1.0" else word.replace(".", "_")
