"""Worker side under Model Runner V2: adaptive verification's draft budget rides back to the
engine core on the step's output.

``AdaptiveVerificationManager.reallocate_drafts`` (method dspark with
``enable_adaptive_verification``) verifies ``draft_budget`` of the step's scheduled drafts; which
requests' drafts it admits is decided on the GPU and never reaches the host, but the budget does
(``_batch_budget``, stashed by ``get_num_tokens`` in the same step; the scheduled drafts it is
compared with are the scheduler's own). The wrapper keeps the budget with the step's
``idx_mapping``; V2's
``sample_tokens`` attaches it to the ``ModelRunnerOutput`` of the same batch (the one its
``execute_model_state`` holds), where the scheduler hook reads it. Plain host ints: no GPU read,
no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from specmetrics.emitter.vllm.patching import Guard, Hook, attach_to_output, find, wrap_all

BUDGET_ATTR = "specmetrics_verify_budget"  # the step's draft budget (int) on the ModelRunnerOutput
_LAST = "_specmetrics_last_budget"  # (idx_mapping, draft_budget) on the manager


def install() -> list[str]:
    """Wrap V2's adaptive verification and ``sample_tokens``; returns what could not be observed."""
    observes = "adaptive verification's verified drafts (k_zero verify_budget, drafts_verified)"
    GPUModelRunner = find("vllm.v1.worker.gpu.model_runner", "GPUModelRunner", observes)
    AdaptiveVerificationManager = find("vllm.v1.worker.gpu.spec_decode.adaptive_verification",
                                       "AdaptiveVerificationManager", observes)
    guard = Guard("adaptive verification's draft budget (Model Runner V2 worker)")
    if GPUModelRunner is not None and AdaptiveVerificationManager is not None and wrap_all((
        Hook(AdaptiveVerificationManager, "reallocate_drafts", ("self", "req_ids", "idx_mapping"), observes,
             partial(_reallocate_wrapper, guard)),
        Hook(GPUModelRunner, "sample_tokens", ("self", "grammar_output"), observes, partial(_sample_wrapper, guard)),
    )):
        return []
    return ["verify_budget"]


# Both wrappers run at every step: their guards stay inline (see Guard.run).


def _reallocate_wrapper(guard: Guard, original: Callable[..., Any]) -> Callable[..., Any]:
    def reallocate_drafts(self: Any, req_ids: list[str], idx_mapping: Any, *args: Any, **kwargs: Any) -> Any:
        budget = getattr(self, "_batch_budget", None) if guard.enabled else None  # consumed by the call
        result = original(self, req_ids, idx_mapping, *args, **kwargs)
        if budget is not None:
            try:
                setattr(self, _LAST, (idx_mapping, int(budget[2])))
            except Exception as exc:
                guard.failed(exc)
        return result

    return reallocate_drafts


def _sample_wrapper(guard: Guard, original: Callable[..., Any]) -> Callable[..., Any]:
    def sample_tokens(self: Any, grammar_output: Any, *args: Any, **kwargs: Any) -> Any:
        state = getattr(self, "execute_model_state", None) if guard.enabled else None
        output = original(self, grammar_output, *args, **kwargs)
        manager = getattr(self, "adaptive_verification", None)
        if state is not None and manager is not None and guard.enabled:
            try:
                last = manager.__dict__.pop(_LAST, None)
                if last is not None and last[0] is state.input_batch.idx_mapping:
                    attach_to_output(output, BUDGET_ATTR, last[1])
            except Exception as exc:
                guard.failed(exc)
        return output

    return sample_tokens
