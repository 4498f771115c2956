"""Real runs on the local device: training steps beside their estimate (`measure`, which
reports each step to an `on_step` callback as a `StepDone`), what a run is expected to take
before it starts (`forecast`), the real largest micro-batch (`find_max_batch`) and inference
latency (`measure_latency`)."""

from trainfit.measure.compare import Comparison, compare
from trainfit.measure.forecast import Forecast, forecast
from trainfit.measure.latency import LatencyTable, measure_latency
from trainfit.measure.max_batch import RealMaxBatch, find_max_batch
from trainfit.measure.steps import Measured, StepDone, measure

__all__ = [
    "Comparison",
    "Forecast",
    "LatencyTable",
    "Measured",
    "RealMaxBatch",
    "StepDone",
    "compare",
    "find_max_batch",
    "forecast",
    "measure",
    "measure_latency",
]
