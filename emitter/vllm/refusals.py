"""Front-end side: requests vLLM refuses for length. A prompt longer than the served context (after
a context cap too, see :mod:`emitter.vllm.config`) is refused before any engine step, by the
renderer's token or text length check or by the input processor, with a 400 and no metric of
vLLM's. The wrappers count each refusal in a Prometheus counter of the front-end process, so it
shows on vLLM's own ``/metrics`` (``specmetrics_requests_refused_for_length_total{check}``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, partial
from typing import Any

from specmetrics.emitter.vllm.patching import Guard, Hook, find

COUNTER = "specmetrics_requests_refused_for_length"
#: The check that refused: the renderer's on prompt tokens, on prompt text, the input processor's.
CHECKS = ("prompt_tokens", "prompt_text", "model_input")


@cache
def refusals() -> Any:
    """The counter, made on first use in the default registry, which vLLM's ``/metrics`` serves
    (made late, so that a multiprocess registry set up by vLLM's API server is honoured)."""
    from prometheus_client import Counter

    return Counter(COUNTER, "Requests vLLM refused before any engine step because the prompt does not fit the "
                   "served context (max_model_len), by the check that refused them.", ["check"])


def install() -> list[str]:
    """Wrap each length check the running vLLM has; returns what could not be observed."""
    error = find("vllm.exceptions", "VLLMValidationError", "requests refused for length")
    tokenize = find("vllm.renderers.params", "TokenizeParams", "requests refused for length by the renderer")
    processor = find("vllm.v1.engine.input_processor", "InputProcessor",
                     "requests refused for length by the input processor")
    hooks = []
    for owner, name, params, check in ((tokenize, "_token_len_check", ("self", "tokenizer", "tokens"), CHECKS[0]),
                                       (tokenize, "_text_len_check", ("self", "tokenizer", "text"), CHECKS[1]),
                                       (processor, "_validate_prompt_len", ("self", "prompt_len"), CHECKS[2])):
        if owner is not None and error is not None:
            guard = Guard(f"requests refused for length ({owner.__name__}.{name})")
            hooks.append(Hook(owner, name, params, "requests refused for length",
                              partial(_counting_wrapper, guard, check, error), lost="requests refused for length"))
    installed = [hook.wrap() for hook in hooks]
    return [] if len(installed) == 3 and all(installed) else ["requests refused for length"]


def _counting_wrapper(guard: Guard, check: str, error: type[Exception], original: Callable[..., Any]
                      ) -> Callable[..., Any]:
    def length_check(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(self, *args, **kwargs)
        except error:
            # vLLM's own error goes on. The input processor also refuses an empty prompt: not a length.
            if guard.enabled and (check != "model_input" or (args and args[0])):
                try:
                    refusals().labels(check=check).inc()
                except Exception as failed:
                    guard.failed(failed)
            raise

    return length_check
