"""The vLLM plugin entry point (``vllm.general_plugins``: ``specmetrics = emitter.plugin:register``).

vLLM calls :func:`register` in every process it starts (front end, engine core, workers).
Without ``SPECMETRICS_SINK`` it logs one line and does nothing else. With it, the worker and
scheduler hooks are installed (idempotently) and the process that runs a scheduler gets a
publisher, created with the first scheduler that drafts and flushed when the engine core shuts
down or the process exits. Where the scheduler hook is off or cannot install, the stat logger
(:mod:`emitter.vllm.stat_logger`) records vLLM's own counters instead (:func:`vllm_only`).
"""

from __future__ import annotations

import atexit
import importlib
import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType

from specmetrics.emitter.publisher import EventPublisher
from specmetrics.emitter.settings import EmitterSettings
from specmetrics.emitter.sinks import open_sink
from specmetrics.emitter.step_events import StepEvents
from specmetrics.emitter.vllm.patching import vllm_version
from specmetrics.schemas.events import VllmOnlyReason

logger = logging.getLogger("vllm.specmetrics")  # among vLLM's own log lines, same format and level
ALL_OUTCOMES = "all outcomes"  # what a scheduler hook that did not install costs


@dataclass
class _PluginState:
    settings: EmitterSettings | None = None
    publisher: EventPublisher | None = None
    engines: int = 0  # engine cores of this process that publish (several may run in one process)
    vllm_only: VllmOnlyReason | None = None  # why the scheduler hook records no outcome in this process
    lock: threading.Lock = field(default_factory=threading.Lock)


_state = _PluginState()


def register() -> None:
    """Install the hooks if a sink is configured. Never raises into vLLM."""
    try:
        settings = EmitterSettings()
        if not settings.sink:
            logger.warning("specmetrics: SPECMETRICS_SINK is not set; the plugin records nothing")
            return
        _state.settings = settings
    except Exception:
        logger.exception("specmetrics: could not install the plugin; vLLM runs without it")
        return
    # The sides install apart: a worker module that does not import must not cost the scheduler's events.
    missing = _install("specmetrics.emitter.vllm.config", "context_cap_from", lambda config: config.install())
    missing += _install("specmetrics.emitter.vllm.refusals", "requests refused for length",
                        lambda front: front.install())
    missing += _install("specmetrics.emitter.vllm.worker", "skipped_for_length", lambda worker: worker.install())
    missing += _install("specmetrics.emitter.vllm.worker_v2", "verify_budget", lambda worker: worker.install())
    if settings.step_hook:
        lost = _install("specmetrics.emitter.vllm.scheduler", ALL_OUTCOMES,
                        lambda scheduler: scheduler.install(settings, attach, detach))
        missing += lost
        if ALL_OUTCOMES in lost:
            _state.vllm_only = VllmOnlyReason.STEP_HOOK_NOT_INSTALLED
    else:
        _state.vllm_only = VllmOnlyReason.STEP_HOOK_OFF
        missing.append(f"{ALL_OUTCOMES} (SPECMETRICS_STEP_HOOK is false: vLLM's own counters only)")
    if missing:
        logger.warning("specmetrics: vLLM %s: recording step events without: %s", vllm_version(), ", ".join(missing))
    else:
        logger.info("specmetrics: vLLM %s: recording step events, every hook installed", vllm_version())


def vllm_only() -> VllmOnlyReason | None:
    """Why this process's scheduler hook records no outcome (off, or not installed); None when it does."""
    return _state.vllm_only


def settings() -> EmitterSettings:
    """The plugin's settings: those read at registration, else the environment's now."""
    return _state.settings or EmitterSettings()


def _install(module: str, lost: str, install: Callable[[ModuleType], list[str]]) -> list[str]:
    """Import ``module`` and install its hooks; a failure costs only what they observe."""
    try:
        return install(importlib.import_module(module))
    except Exception:
        logger.exception("specmetrics: could not install %s; vLLM runs without it", module)
        return [lost]


def publisher(dp_rank: int = 0) -> EventPublisher:
    """This process's publisher (created on first use; flushed and closed at exit). Data-parallel
    engines run one per process: rank N > 0 gets a spool folder and health file of its own
    (``-dpN``), so they do not share one, and a restart finds its spool again."""
    with _state.lock:
        if _state.publisher is None:
            current = settings()
            url = current.sink
            if not url:
                raise RuntimeError("SPECMETRICS_SINK is not set")
            name = current.engine_label or socket.gethostname()  # stable: a restart replays its Kafka spool
            if dp_rank:
                name = f"{name}-dp{dp_rank}"
                if current.health_file is not None:
                    health = current.health_file
                    current = current.model_copy(
                        update={"health_file": health.with_name(f"{health.stem}-dp{dp_rank}{health.suffix}")})
            _state.publisher = EventPublisher(lambda: open_sink(url, name), current, StepEvents())
            atexit.register(flush)
        return _state.publisher


def attach(dp_rank: int = 0) -> EventPublisher:
    """The publisher, for one more engine core of this process (see :func:`detach`)."""
    found = publisher(dp_rank)
    with _state.lock:
        _state.engines += 1
    return found


def detach() -> None:
    """An engine core shuts down: flush once the last one of this process has."""
    with _state.lock:
        _state.engines = max(_state.engines - 1, 0)
        last = _state.engines == 0
    if last:
        flush()


def flush(timeout_s: float = 5.0) -> None:
    """Send every queued step and close the sink (safe to call more than once)."""
    with _state.lock:
        current, _state.publisher = _state.publisher, None
    if current is not None:
        current.close(timeout_s)
