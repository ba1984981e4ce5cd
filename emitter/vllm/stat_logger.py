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
from typing import Any

from vllm.v1.metrics.loggers import StatLoggerBase

from specmetrics.emitter import plugin
from specmetrics.emitter.vllm.scheduler import VllmOnlySteps, engine_context

logger = logging.getLogger("vllm.specmetrics")  # among vLLM's own log lines, same format and level


class VllmCountsLogger(StatLoggerBase):
    """One per engine (vLLM makes one per engine index). Never raises into vLLM: a failure logs once
    and stops this logger."""

    def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
        self.steps: VllmOnlySteps | None = None
        try:
            reason = plugin.vllm_only()
            spec = vllm_config.speculative_config
            if reason is None or spec is None or not spec.num_speculative_tokens:
                return
            context = engine_context(vllm_config, plugin.settings(), engine_index)
            self.steps = VllmOnlySteps(context, plugin.attach(engine_index), reason)
            logger.warning("specmetrics: engine %d: recording vLLM's own counters only (%s): corrected metrics "
                           "unavailable", engine_index, reason.value)
        except Exception:
            logger.exception("specmetrics: the stat logger could not start; vLLM runs without it")

    def record(self, scheduler_stats: Any, iteration_stats: Any, mm_cache_stats: Any = None,
               engine_idx: int = 0) -> None:
        if self.steps is None or scheduler_stats is None:
            return
        try:
            stats = scheduler_stats.spec_decoding_stats
            if stats is not None:  # None: vLLM counted no draft at the step
                self.steps.publish(stats)
        except Exception:
            self.steps = None
            logger.exception("specmetrics: recording vLLM's counters failed and is now disabled; vLLM keeps serving")

    def log_engine_initialized(self) -> None:
        pass
