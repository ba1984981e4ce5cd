"""Worker side: the drafter-fit decision rides back to the engine core on the step's output.

``GPUModelRunner._input_fits_in_drafter`` (inherited by the CPU runner) decides, batch-wide,
whether the drafter runs; when it does not, vLLM writes placeholder drafts (zeros). The
wrapper keeps the decision with the batch's ``max_seq_len`` and the drafter's limit, and
``sample_tokens`` attaches it to its ``ModelRunnerOutput`` as a tuple of ints (pickled with
the output under multiprocessing). The worker does no I/O and reads only CPU ints.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from specmetrics.emitter.vllm.patching import Guard, Hook, attach_to_output, find, vllm_version, wrap_all

DECISION_ATTR = "specmetrics_draft_decision"
_LAST = "_specmetrics_last_decision"
logger = logging.getLogger("vllm.specmetrics")


def v1_runner_removed() -> bool:
    """Whether this vLLM has no V1 model runner left (0.34 removed it): Model Runner V2 runs."""
    return importlib.util.find_spec("vllm.v1.worker.gpu_model_runner") is None


def install() -> list[str]:
    """Wrap the V1 model runner (up to vLLM 0.33); returns what could not be observed. Without it,
    nothing is lost: Model Runner V2 never skips drafting for length."""
    if v1_runner_removed():
        logger.info("specmetrics: vLLM %s runs Model Runner V2 only, which never skips drafting for length (it "
                    "lowers the context to the drafter's max length instead: context_cap_from); no worker hook "
                    "needed for skipped_for_length", vllm_version())
        return []
    observes = "drafting skipped for length (skipped_for_length events)"
    GPUModelRunner = find("vllm.v1.worker.gpu_model_runner", "GPUModelRunner", observes)
    guard = Guard("the drafter-fit decision (worker)")
    if GPUModelRunner is not None and wrap_all((
        Hook(GPUModelRunner, "_input_fits_in_drafter", ("self", "common_attn_metadata"), observes,
             partial(_fits_wrapper, guard)),
        Hook(GPUModelRunner, "sample_tokens", ("self", "grammar_output"), observes, partial(_sample_wrapper, guard)),
    )):
        return []
    return ["skipped_for_length"]


# Both wrappers run at every step: their guards stay inline (see Guard.run).


def _fits_wrapper(guard: Guard, original: Callable[..., bool]) -> Callable[..., bool]:
    def _input_fits_in_drafter(self: Any, common_attn_metadata: Any, *args: Any, **kwargs: Any) -> bool:
        fits = original(self, common_attn_metadata, *args, **kwargs)
        if guard.enabled:
            try:
                max_seq_len = -1 if common_attn_metadata is None else int(common_attn_metadata.max_seq_len)
                setattr(self, _LAST, (bool(fits), max_seq_len, int(self.effective_drafter_max_model_len)))
            except Exception as exc:
                guard.failed(exc)
        return fits

    return _input_fits_in_drafter


def _sample_wrapper(guard: Guard, original: Callable[..., Any]) -> Callable[..., Any]:
    def sample_tokens(self: Any, grammar_output: Any, *args: Any, **kwargs: Any) -> Any:
        if guard.enabled:
            self.__dict__.pop(_LAST, None)
        output = original(self, grammar_output, *args, **kwargs)
        if guard.enabled:
            try:
                decision = self.__dict__.pop(_LAST, None)
                if decision is not None:
                    attach_to_output(output, DECISION_ATTR, decision)
            except Exception as exc:
                guard.failed(exc)
        return output

    return sample_tokens
