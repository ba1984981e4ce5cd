"""Wrapping vLLM methods safely: checked before, contained after.

A target whose method is missing or whose signature changed is not wrapped; a warning names
what cannot be observed. A wrapper whose observation raises logs once (with the vLLM version),
disables itself, and vLLM's own method still runs: the plugin never breaks the engine.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

logger = logging.getLogger("vllm.specmetrics")  # among vLLM's own log lines, same format and level
MARKER = "__specmetrics_wrapped__"


def vllm_version() -> str:
    try:
        import vllm

        return str(vllm.__version__)
    except Exception:  # vLLM may be half-importable in odd environments
        return "unknown"


def find(module: str, name: str, observes: str) -> Any:
    """``module.name`` in the running vLLM, or None after a warning that names it and what cannot be
    observed without it (a release that removed or moved it)."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        logger.warning("specmetrics: vLLM %s has no %s.%s (%s): cannot observe %s", vllm_version(), module, name,
                       exc, observes)
        return None


def signature_matches(method: Callable[..., Any], params: tuple[str, ...]) -> bool:
    try:
        names = tuple(inspect.signature(method).parameters)
    except (TypeError, ValueError):
        return False
    return names[: len(params)] == params


def wrap(owner: type, name: str, params: tuple[str, ...], observes: str,
         make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> bool:
    """Replace ``owner.name`` with ``make(original)`` if its signature starts with ``params``."""
    original = owner.__dict__.get(name)
    if original is None or not callable(original):
        logger.warning("specmetrics: %s.%s not found in vLLM %s: cannot observe %s",
                       owner.__qualname__, name, vllm_version(), observes)
        return False
    if getattr(original, MARKER, False):
        return True  # already wrapped (plugins load once per process, forks inherit patches)
    if not signature_matches(original, params):
        logger.warning("specmetrics: %s.%s%s does not match the expected (%s) in vLLM %s: cannot observe %s",
                       owner.__qualname__, name, inspect.signature(original), ", ".join(params), vllm_version(),
                       observes)
        return False
    wrapper = functools.wraps(original)(make(original))
    setattr(wrapper, MARKER, True)
    setattr(owner, name, wrapper)
    return True


class Hook(NamedTuple):
    """One vLLM method to wrap: ``make(original)`` replaces ``owner.name`` if its signature starts
    with ``params``; ``observes`` says what a failed wrap costs, ``lost`` names it in the plugin's
    "installed without" line."""

    owner: type
    name: str
    params: tuple[str, ...]
    observes: str
    make: Callable[[Callable[..., Any]], Callable[..., Any]]
    lost: str = ""

    def wrap(self) -> bool:
        return wrap(self.owner, self.name, self.params, self.observes, self.make)


def wrap_all(hooks: Sequence[Hook]) -> bool:
    """Wrap the hooks in order, up to the first that cannot be wrapped: hooks that work only
    together (one notes a value, the next attaches it). True if all were wrapped."""
    return all(hook.wrap() for hook in hooks)


class Guard:
    """Runs observation code; the first exception disables it for the life of the process."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.enabled = True

    def run(self, observe: Callable[..., object], *args: Any) -> None:
        """``observe(*args)`` while enabled; its exception is logged and disables the guard. One
        Python call more than the inline ``if enabled: try ... except`` shape, which the wrappers
        that run at every step keep."""
        if self.enabled:
            try:
                observe(*args)
            except Exception as exc:
                self.failed(exc)

    def failed(self, exc: BaseException) -> None:
        self.enabled = False
        logger.error("specmetrics: observing %s failed under vLLM %s and is now disabled; vLLM keeps serving "
                     "(%s: %s)", self.what, vllm_version(), type(exc).__name__, exc, exc_info=exc)


def attach_to_output(output: Any, name: str, value: Any) -> None:
    """Set ``name`` on the ``ModelRunnerOutput`` a runner's ``sample_tokens`` returned: the output
    itself, or the one inside an async wrapper (V1 ``_model_runner_output``, V2 ``AsyncOutput``'s
    ``model_runner_output``: the object handed to the scheduler later); never on vLLM's shared
    empty output."""
    target = getattr(output, "_model_runner_output", getattr(output, "model_runner_output", output))
    if target is not None and target is not _empty_output():
        setattr(target, name, value)


@functools.cache
def _empty_output() -> Any:
    from vllm.v1.outputs import EMPTY_MODEL_RUNNER_OUTPUT

    return EMPTY_MODEL_RUNNER_OUTPUT
