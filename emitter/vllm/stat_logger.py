"""API-server side: vLLM's own counters where the scheduler hook sees nothing.

vLLM hands each engine step's ``SchedulerStats`` to the stat loggers registered under the
``vllm.stat_logger_plugins`` entry point (``AsyncLLM``: ``vllm serve``; the offline ``LLM`` loads
none). Where the scheduler hook is off (``SPECMETRICS_STEP_HOOK=false``) or could not install on
the running vLLM (:func:`emitter.plugin.vllm_only`), this logger publishes each step whose stats
hold ``SpecDecodingStats`` as a vllm_only step: vLLM's numbers only, with the reason, so the
views, the report and the dashboard show vLLM's history and say why the corrected metrics are
missing. Where the hook records, it does nothing.

vLLM turns its stats on for any stat-logger plugin, ``--disable-log-stats`` or not (``AsyncLLM``:
``log_stats = log_stats or has_custom_loggers``); ``VLLM_PLUGINS`` without
``specmetrics_vllm_counts`` keeps this logger out (docs/plugin.md).
"""

from __future__ import annotations

import logging
from time import time_ns
from typing import Any

from vllm.v1.metrics.loggers import StatLoggerBase

from specmetrics.emitter import plugin
from specmetrics.emitter.publisher import EventPublisher
from specmetrics.emitter.settings import EmitterSettings
from specmetrics.emitter.step_events import VllmOnlyStep
from specmetrics.emitter.vllm.scheduler import engine_context
from specmetrics.schemas.events import VllmOnlyReason

logger = logging.getLogger("vllm.specmetrics")  # among vLLM's own log lines, same format and level


class VllmCountsLogger(StatLoggerBase):
    """One per engine (vLLM makes one per engine index). Never raises into vLLM: a failure logs once
    and stops this logger."""

    def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
        self.engine_index = engine_index
        self.reason: VllmOnlyReason | None = None
        self.publisher: EventPublisher | None = None
        self.context: dict[str, Any] = {}
        self.steps = 0
        try:
            reason = plugin.vllm_only()
            spec = vllm_config.speculative_config
            if reason is None or spec is None or not spec.num_speculative_tokens:
                return
            settings = EmitterSettings()
            self.context = engine_context(vllm_config, settings, engine_index)
            self.publisher = plugin.attach(engine_index)
            self.reason = reason
            logger.warning("specmetrics: engine %d: recording vLLM's own counters only (%s): corrected metrics "
                           "unavailable", engine_index, reason.value)
        except Exception:
            logger.exception("specmetrics: the stat logger could not start; vLLM runs without it")

    def record(self, scheduler_stats: Any, iteration_stats: Any, mm_cache_stats: Any = None,
               engine_idx: int = 0) -> None:
        if self.reason is None or self.publisher is None or scheduler_stats is None:
            return
        try:
            stats = scheduler_stats.spec_decoding_stats
            if stats is None:  # vLLM counted no draft at the step
                return
            self.publisher.publish((self.context, VllmOnlyStep(self.steps, time_ns() // 1000, self.reason, stats)))
            self.steps += 1
        except Exception:
            self.reason = None
            logger.exception("specmetrics: recording vLLM's counters failed and is now disabled; vLLM keeps serving")

    def log_engine_initialized(self) -> None:
        pass
