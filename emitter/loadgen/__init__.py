"""The load generator: vLLM-shaped step streams with exact ground truth."""

from specmetrics.emitter.loadgen.ground_truth import EngineTruth
from specmetrics.emitter.loadgen.simulator import run_load
from specmetrics.emitter.loadgen.spec import LoadSpec

__all__ = ["EngineTruth", "LoadSpec", "run_load"]
