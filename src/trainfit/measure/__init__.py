"""Real runs on the local device: training steps beside their estimate (`measure`), the real
largest micro-batch (`find_max_batch`) and inference latency (`measure_latency`)."""

from trainfit.measure.compare import Comparison, compare
from trainfit.measure.latency import LatencyTable, measure_latency
from trainfit.measure.max_batch import RealMaxBatch, find_max_batch
from trainfit.measure.steps import Measured, measure

__all__ = [
    "Comparison",
    "LatencyTable",
    "Measured",
    "RealMaxBatch",
    "compare",
    "find_max_batch",
    "measure",
    "measure_latency",
]
