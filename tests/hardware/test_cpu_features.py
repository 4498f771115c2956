"""CPU features: the flags read from /proc/cpuinfo and sysctl, and how bf16/fp16 matmuls run."""

from __future__ import annotations

import pytest

from trainfit.hardware.cpu_features import HalfSupport, cpu_features
from trainfit.hardware.probe import FakeProbe

ZEN4 = (
    "processor\t: 0\nmodel name\t: AMD EPYC 9R14\ncpu MHz\t\t: 2596.138\n"
    "flags\t\t: fpu sse2 avx fma avx2 avx512f avx512dq avx512bw avx512vl avx512_bf16\n"
)


def _cpuinfo(model: str, mhz: str, flags: str) -> str:
    return f"model name\t: {model}\ncpu MHz\t\t: {mhz}\nflags\t\t: {flags}\n"


LAPTOP = _cpuinfo("Intel(R) Core(TM) i7-8550U", "1800.0", "sse2 avx avx2 fma")
SKYLAKE_X = _cpuinfo("Xeon Gold 6148", "2400", "avx2 avx512f avx512bw avx512vl avx512dq")
SAPPHIRE = _cpuinfo(
    "Xeon 8480+", "2000", "avx512f avx512bw avx512vl avx512dq avx512_fp16 amx_bf16 amx_fp16"
)
GRAVITON3 = "processor\t: 0\nFeatures\t: fp asimd fphp asimdhp bf16 sve\nCPU part\t: 0xd40\n"


@pytest.mark.parametrize(
    ("text", "bf16", "fp16"),
    [
        (ZEN4, HalfSupport.NATIVE, HalfSupport.EMULATED),
        (LAPTOP, HalfSupport.EMULATED, HalfSupport.EMULATED),
        (SKYLAKE_X, HalfSupport.CONVERTED, HalfSupport.EMULATED),
        (SAPPHIRE, HalfSupport.NATIVE, HalfSupport.NATIVE),
        (GRAVITON3, HalfSupport.NATIVE, HalfSupport.NATIVE),
    ],
)
def test_half_support_follows_the_flags(text: str, bf16: HalfSupport, fp16: HalfSupport) -> None:
    features = cpu_features(FakeProbe(cpuinfo_text=text))
    assert (features.half_support("bf16"), features.half_support("fp16")) == (bf16, fp16)


def test_linux_model_clock_and_peak() -> None:
    features = cpu_features(FakeProbe(cpuinfo_text=ZEN4, threads=2, usable_cores=2))
    assert features.model == "AMD EPYC 9R14"
    assert features.clock_mhz == pytest.approx(2596.138)
    assert features.simd_lanes == 16
    # 2 threads x 16 lanes x 2 FMA units x 2 FLOPs x 2.596 GHz
    assert features.peak_fp32_flops == pytest.approx(2 * 16 * 2 * 2 * 2596.138e6)
    assert features.source == "/proc/cpuinfo"


def test_an_arm_host_without_a_clock_has_no_peak() -> None:
    features = cpu_features(FakeProbe(cpuinfo_text=GRAVITON3))
    assert features.simd_lanes == 4
    assert features.clock_mhz is None
    assert features.peak_fp32_flops is None


def test_apple_silicon_reads_sysctl_keys() -> None:
    probe = FakeProbe(
        system_name="Darwin",
        sysctl_values={
            "machdep.cpu.brand_string": "Apple M2",
            "hw.optional.arm.FEAT_BF16": "1",
            "hw.optional.arm.FEAT_FP16": "1",
            "hw.optional.AdvSIMD": "1",
        },
    )
    features = cpu_features(probe)
    assert features.model == "Apple M2"
    assert features.half_support("bf16") is HalfSupport.NATIVE
    assert features.half_support("fp16") is HalfSupport.NATIVE
    assert features.source == "sysctl"


def test_an_intel_mac_maps_sysctl_spelling() -> None:
    probe = FakeProbe(
        system_name="Darwin",
        sysctl_values={
            "machdep.cpu.brand_string": "Intel(R) Core(TM) i9-9880H",
            "machdep.cpu.features": "FPU SSE2 AVX1.0 FMA SSE4.1",
            "machdep.cpu.leaf7_features": "AVX2 BMI2",
            "hw.cpufrequency": "2300000000",
        },
    )
    features = cpu_features(probe)
    assert {"avx", "avx2", "fma", "sse4_1"} <= features.flags
    assert features.clock_mhz == 2300.0
    assert features.half_support("bf16") is HalfSupport.EMULATED


def test_half_support_takes_only_half_dtypes() -> None:
    with pytest.raises(ValueError, match="'bf16' or 'fp16', got 'fp32'"):
        cpu_features(FakeProbe(cpuinfo_text=ZEN4)).half_support("fp32")
