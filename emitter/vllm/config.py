"""Front-end side: the context cap. Under Model Runner V2 (from vLLM 0.33; the only runner in 0.34)
vLLM cannot skip drafting for sequences longer than the drafter's max model length, so
``VllmConfig._limit_max_model_len_to_draft`` lowers the *target's* ``max_model_len`` to the
drafter's when the config is built: a model served for 131,072 tokens becomes a 2,048-token server,
with one log line. The wrapper notes the length before the cap on the ``ModelConfig``, which is
pickled to the engine core with the rest of the config; the scheduler hook puts it in every step
event's engine context (``context_cap_from``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from specmetrics.emitter.vllm.patching import Guard, Hook

CAP_FROM_ATTR = "specmetrics_context_cap_from"  # on the ModelConfig: max_model_len before the cap


def install() -> list[str]:
    """Wrap the cap where the running vLLM has one (0.32 has none: it skips drafts instead);
    returns what could not be observed."""
    from vllm.config import VllmConfig

    if "_limit_max_model_len_to_draft" not in VllmConfig.__dict__:
        return []
    hook = Hook(VllmConfig, "_limit_max_model_len_to_draft", ("self",), "the context cap (context_cap_from)",
                partial(_cap_wrapper, Guard("the context cap (VllmConfig._limit_max_model_len_to_draft)")),
                lost="context_cap_from")
    return [] if hook.wrap() else [hook.lost]


def _cap_wrapper(guard: Guard, original: Callable[..., Any]) -> Callable[..., Any]:
    def _limit_max_model_len_to_draft(self: Any, *args: Any, **kwargs: Any) -> Any:
        model_config = self.model_config if guard.enabled else None
        before = getattr(model_config, "max_model_len", None)
        result = original(self, *args, **kwargs)
        if model_config is not None:
            try:
                if before is not None and model_config.max_model_len != before:
                    model_config.__dict__[CAP_FROM_ATTR] = int(before)
            except Exception as exc:
                guard.failed(exc)
        return result

    return _limit_max_model_len_to_draft
