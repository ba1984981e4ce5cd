"""The load generator: vLLM-shaped step streams with exact ground truth."""

from emitter.loadgen.ground_truth import EngineTruth
from emitter.loadgen.simulator import run_load
from emitter.loadgen.spec import LoadSpec

__all__ = ["EngineTruth", "LoadSpec", "run_load"]
