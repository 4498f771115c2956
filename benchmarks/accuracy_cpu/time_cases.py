"""The CPU step-time cases: TrainSpec keyword arguments (device "cpu").

`FIT` cases set the one constant fitted on real steps (`backward_op_seconds` of
`trainfit/timing/cpu_calibration.json`); every other case is held out: its prediction is
committed (results/time_predicted_cpu.json) before it is measured.
"""

from __future__ import annotations

from typing import Any

ZOO = "trainfit.models.zoo"
HERE = "benchmarks.accuracy_cpu.time_models"
MLP = dict(model=f"{HERE}:wide_mlp", inputs=("input=B,1024:float32",), loss=None)
CNN = dict(model=f"{HERE}:small_cnn", inputs=("input=B,3,64,64:float32",), loss=None)
CONV_NET = dict(model=f"{HERE}:conv_net", inputs=("input=B,3,96,96:float32",), loss=None)

TIME_CASES: dict[str, dict[str, Any]] = {
    # fitted on
    "emotion-mlp-fp32": dict(model=f"{ZOO}:emotion_mlp", batch=256, precision="fp32"),
    "t5-small-fp32": dict(model="t5-small", batch=1, seq_len=64, precision="fp32"),
    # held out
    "gpt2-fp32": dict(model="gpt2", batch=1, seq_len=64, precision="fp32"),
    "gpt2-bf16": dict(model="gpt2", batch=1, seq_len=64, precision="bf16"),
    # NB: fp16 matmuls are emulated on a CPU without avx512_fp16/amx_fp16: a short sequence
    "gpt2-fp16": dict(model="gpt2", batch=1, seq_len=8, precision="fp16"),
    "wide-mlp-fp32": dict(**MLP, batch=64, precision="fp32"),
    "wide-mlp-bf16": dict(**MLP, batch=64, precision="bf16"),
    "small-cnn-fp32": dict(**CNN, batch=16, precision="fp32"),
    "small-cnn-bf16": dict(**CNN, batch=16, precision="bf16"),
    # held out from the second model (convolution rates), predicted before measured
    "conv-net-fp32": dict(**CONV_NET, batch=8, precision="fp32"),
    "conv-net-bf16": dict(**CONV_NET, batch=8, precision="bf16"),
    "redimnet-fp32": dict(model=f"{ZOO}:redimnet_like", batch=2, precision="fp32"),
}

SECOND_MODEL = ("conv-net-fp32", "conv-net-bf16", "redimnet-fp32")
"""Cases added with the second model (3x3 convolution rates); the first model's prediction
file does not have them."""

FIT = ("emotion-mlp-fp32", "t5-small-fp32")
