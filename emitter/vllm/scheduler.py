"""Engine-core side: one step event per engine step, from the scheduler's own data.

``Scheduler.update_from_output`` knows, per request, the draft slots it scheduled, the -1
pads of grammar-invalid drafts (async) and the sampled tokens; the wrapper reads the sampled
lengths before vLLM truncates at stop tokens (``accepted``) and after (``emitted``).
``update_draft_token_ids`` (sync) shows how many drafts were proposed and, for requests with
a grammar, how many it kept and how many of those obey it. ``schedule`` tags its output with the
step index and the decoding requests it left without a draft slot, and its
``num_spec_tokens_to_schedule`` (dynamic K) sizes the drafts verified at the next step. The
worker's drafting decision (V1) and adaptive verification's budget (V2) arrive on the
``ModelRunnerOutput``.
"""

from __future__ import annotations

import itertools
import os
import socket
import uuid
from collections.abc import Callable
from functools import partial
from operator import attrgetter
from time import time_ns
from typing import Any

from specmetrics.emitter.plugin import ALL_OUTCOMES
from specmetrics.emitter.publisher import EventPublisher
from specmetrics.emitter.settings import EmitterSettings
from specmetrics.emitter.step_events import VllmOnlyStep
from specmetrics.emitter.vllm.config import CAP_FROM_ATTR
from specmetrics.emitter.vllm.patching import Guard, Hook, vllm_version
from specmetrics.emitter.vllm.worker import DECISION_ATTR, v1_runner_removed
from specmetrics.emitter.vllm.worker_v2 import BUDGET_ATTR
from specmetrics.schemas.events import VllmCountsMissing, VllmOnlyReason

OBSERVER_ATTR = "_specmetrics_observer"
STATS_OFF, NOT_RETURNED = VllmCountsMissing.STATS_OFF.value, VllmCountsMissing.NOT_RETURNED.value
TAG_ATTR = "specmetrics_step"  # a Tag, set by schedule
REQUEST_ID = attrgetter("request_id")
COMPUTED = attrgetter("num_computed_tokens")
NONE_WITHOUT_DRAFTS: dict[str, int] = {}  # shared, never written: most steps have no such request
#: (step index, decoding requests without a draft slot, scheduled requests' lengths), see EngineObserver.tag
Tag = tuple[int, dict[str, int], list[int]]


class EngineObserver:
    """Per scheduler (one per engine): the step context and the state linking steps.

    Everything here runs on the engine thread and stays O(1) Python work per step, plus
    C-level passes (``map(len, ...)``) over the batch; the per-request work happens in
    :func:`emitter.outcomes.step_outcomes` on the publisher's thread.
    """

    def __init__(self, scheduler: Any, settings: EmitterSettings, attach: Callable[[int], EventPublisher]) -> None:
        from vllm.v1.core.sched.async_scheduler import AsyncScheduler

        parallel = scheduler.vllm_config.parallel_config
        dp_rank = int(getattr(parallel, "data_parallel_index", getattr(parallel, "data_parallel_rank", 0)) or 0)
        self.context = engine_context(scheduler.vllm_config, settings, dp_rank)
        # Model Runner V2 never skips drafting for length: no decision is expected from its workers.
        self.context["runner_v2"] = runs_model_runner_v2(scheduler)
        self.max_model_len = int(scheduler.max_model_len)
        self.num_sampled = int(getattr(scheduler, "num_sampled_tokens_per_step", 1))
        self.decision: tuple[bool, int, int] | None = None  # the worker's, see DraftDecision
        self.proposed: tuple[list[str], list[int]] | None = None  # the last proposal: request ids, draft counts
        self.truncated: dict[str, tuple[int, int, int]] = {}
        self.step_k: int | None = None  # the K the last step's schedule chose (dynamic K), for the next
        self.skip_drafts = False  # the last step's SchedulerOutput.skip_drafts (0.33 on), for the next
        # Async scheduling hands the scheduler placeholders, never the drafter's proposals.
        self.asynchronous = isinstance(scheduler, AsyncScheduler)
        # vLLM computes its own counters only with stats on (not with --disable-log-stats)
        self.stats_off = not getattr(scheduler, "log_stats", False)
        # vLLM keeps each request's own metrics with --per-request-spec-decode-metrics (0.29 on)
        self.per_request = getattr(scheduler, "spec_decode_metrics_level", "none") != "none"
        self.after_drop = False  # the last step published was dropped from a full queue
        # Once the outcomes' hook disabled itself: the engine's vLLM-only steps.
        self.counts_only: VllmOnlySteps | None = None
        self.detached = False
        self.publisher = attach(self.context["dp_rank"])  # last: an engine is counted once it observes

    def tag(self, scheduler: Any, scheduler_output: Any) -> Tag:
        """What ``schedule`` notes on its output: the step index, the decoding requests it left
        without a draft slot, and the scheduled requests' lengths (read now: async scheduling moves
        them on before the output returns)."""
        requests = scheduler.requests
        return (int(scheduler.current_step), decoding_without_drafts(requests, scheduler_output),
                seq_lens(requests, scheduler_output.num_scheduled_tokens))

    def before(self, scheduler: Any, scheduler_output: Any, model_runner_output: Any) -> tuple[list[int], Tag] | None:
        """Read what vLLM is about to change: sampled lengths before stop handling; and the tag of
        ``schedule`` (made now if it is not wrapped: in sync mode nothing has moved since it ran)."""
        sampled = model_runner_output.sampled_token_ids
        if not sampled:
            return None
        tag = getattr(scheduler_output, TAG_ATTR, None)
        return list(map(len, sampled)), tag if tag is not None else self.tag(scheduler, scheduler_output)

    def after(self, scheduler_output: Any, model_runner_output: Any, seen: tuple[list[int], Tag] | None,
              outputs: Any) -> None:
        """Swap the state linking steps and publish the step. Cheap on purpose (it runs cold, right
        after vLLM's update): the step's values go out as a plain tuple in the field order of
        :class:`emitter.outcomes.RawStep` (tests/emitter/vllm/test_scheduler.py holds the two
        together), made a ``RawStep`` by :class:`emitter.step_events.StepEvents` on the publisher's
        thread. Not ``RawStep(...)`` here: its generated ``__new__`` costs ~0.8 µs more per step."""
        previous = self.decision
        self.decision = getattr(model_runner_output, DECISION_ATTR, None)
        proposed, self.proposed = self.proposed, None
        truncated, self.truncated = self.truncated, {}
        step_k, drafts_skipped = self.step_k, self.skip_drafts
        if scheduler_output.num_scheduled_tokens:  # a step that scheduled nothing sizes no drafts
            self.step_k = getattr(scheduler_output, "num_spec_tokens_to_schedule", None)
            self.skip_drafts = getattr(scheduler_output, "skip_drafts", False)
        if seen is None:
            return
        sampled_before, (step_index, without, lengths) = seen
        # Async only (vLLM skips requests finished while their step was in flight): the ids, not the
        # outputs, which hold token lists and logprobs a stalled queue would keep alive.
        processed = [rid for core_outputs in outputs.values() for rid in map(REQUEST_ID, core_outputs.outputs)] \
            if self.asynchronous and isinstance(outputs, dict) else None
        self.after_drop = not self.publisher.publish((self.context, (
            step_index, time_ns() // 1000, previous, scheduler_output.num_scheduled_tokens,
            scheduler_output.scheduled_spec_decode_tokens, scheduler_output.num_invalid_spec_tokens,
            model_runner_output.req_ids, sampled_before, list(map(len, model_runner_output.sampled_token_ids)),
            without, proposed, truncated, self.max_model_len, self.num_sampled, step_k, self.asynchronous,
            processed, self.decision, self.after_drop, getattr(model_runner_output, BUDGET_ATTR, None),
            drafts_skipped, lengths, STATS_OFF if self.stats_off else spec_decoding_stats(outputs),
            finished_metrics(outputs) if self.per_request else None)))


def engine_context(config: Any, settings: EmitterSettings, dp_rank: int) -> dict[str, Any]:
    """What stays the same from one step of an engine to the next, from its ``VllmConfig``, and a boot
    id of its own (event ids are ``<boot>-<step>``)."""
    spec, model_config = config.speculative_config, config.model_config
    drafter = getattr(spec, "draft_model_config", None)
    served = model_config.served_model_name
    return {
        "boot": uuid.uuid4().hex[:16],
        "engine_instance": settings.engine_label or f"{socket.gethostname()}-{os.getpid()}",
        "dp_rank": dp_rank,
        "model": str(served[0] if isinstance(served, list | tuple) else served or model_config.model),
        "vllm_version": vllm_version(),
        "method": str(spec.method),
        "num_spec_tokens": int(spec.num_speculative_tokens),
        "drafter_max_len": int(drafter.max_model_len if drafter is not None else model_config.max_model_len),
        "max_model_len": int(model_config.max_model_len),  # what the scheduler serves (Scheduler.max_model_len)
        "context_cap_from": getattr(model_config, CAP_FROM_ATTR, None),
    }


def finished_metrics(outputs: Any) -> list[tuple[str, Any]]:
    """(request id, ``RequestSpecDecodeMetrics``) of each request ``update_from_output`` returned as
    finished with vLLM's per-request metrics (vLLM attaches them to a request's last output only)."""
    if not isinstance(outputs, dict):
        return []
    return [(output.request_id, output.spec_decode_metrics) for core_outputs in outputs.values()
            for output in core_outputs.outputs if output.spec_decode_metrics is not None]


def spec_decoding_stats(outputs: Any) -> Any:
    """The step's ``SpecDecodingStats`` as ``update_from_output`` returned it to the front end (on one
    of its ``EngineCoreOutputs``; None: vLLM counted no draft), or :data:`NOT_RETURNED`."""
    if isinstance(outputs, dict):
        for core_outputs in outputs.values():
            stats = core_outputs.scheduler_stats
            if stats is not None:
                return stats.spec_decoding_stats
    return NOT_RETURNED


def runs_model_runner_v2(scheduler: Any) -> bool:
    """Whether the engine's workers run Model Runner V2: the scheduler's flag (0.32, 0.33), or, where
    the flag is gone, whether vLLM still has the V1 runner (0.34 removed it)."""
    flag = getattr(scheduler, "use_v2_model_runner", None)
    if flag is not None:
        return bool(flag)
    return v1_runner_removed()


def seq_lens(requests: dict[str, Any], num_scheduled: dict[str, int]) -> list[int]:
    """Each scheduled request's sequence length once the step runs, in ``num_scheduled`` order, read
    right after ``schedule`` (which advanced ``num_computed_tokens`` by the scheduled tokens): what the
    worker's drafter-fit check compares, for the batch's longest, after the step. C-level passes."""
    return list(map(COMPUTED, map(requests.__getitem__, num_scheduled)))


def decoding_without_drafts(requests: dict[str, Any], scheduler_output: Any) -> dict[str, int]:
    """The decoding requests scheduled for one token (no draft slot) -> their computed positions
    once the step runs, read right after ``schedule`` (for the max-length clamp). C-level length
    checks first: the loop runs only in steps where some request got no draft slot."""
    drafts, num_scheduled = scheduler_output.scheduled_spec_decode_tokens, scheduler_output.num_scheduled_tokens
    if len(drafts) >= len(num_scheduled):
        return NONE_WITHOUT_DRAFTS
    without: dict[str, int] = {}
    for request_id, n in num_scheduled.items():
        if n == 1 and request_id not in drafts:
            request = requests.get(request_id)
            # Past the prompt: decoding (a last prefill chunk of one token ends at the prompt).
            if request is not None and request.num_computed_tokens > request.num_prompt_tokens:
                without[request_id] = request.num_computed_tokens
    return without


def grammar_truncations(manager: Any, requests: dict[str, Any], ids: list[str], proposed: list[int]
                        ) -> dict[str, tuple[int, int, int]]:
    """``(proposed, kept, valid)`` of the structured-output requests whose drafts the grammar cut, or
    kept past the first invalid one: from vLLM 0.34 (``trim_spec_tokens``) the target verifies that
    one and rejects it, so ``kept`` is ``valid + 1`` where a draft broke the grammar."""
    keeps_invalid = hasattr(manager, "trim_spec_tokens")
    cut = {}
    for request_id, count in zip(ids, proposed, strict=False):
        request = requests.get(request_id)
        if request is None or not request.use_structured_output:
            continue
        kept = request.spec_token_ids
        valid = valid_drafts(manager, request, kept) if keeps_invalid and kept else len(kept)
        if len(kept) != count or valid != len(kept):
            cut[request_id] = (count, len(kept), valid)
    return cut


def valid_drafts(manager: Any, request: Any, kept: list[int]) -> int:
    """How many of the drafts ``trim_spec_tokens`` kept obey the grammar: its own steps, asked again
    (``validate_tokens`` leaves the grammar's state as it was). Drafts before the grammar starts
    (reasoning) are valid, as are all of them once the grammar has terminated (trim cut the rest)."""
    bounds = getattr(manager, "_get_constraint_bounds", None)
    start = bounds(request, kept)[0] if bounds is not None else 0
    grammar = request.structured_output_request.grammar
    if start >= len(kept) or grammar.is_terminated():
        return len(kept)
    return start + len(grammar.validate_tokens(kept[start:]))


ObserverOf = Callable[[Any], EngineObserver | None]

# The wrappers that run at every step keep their try/except inline: a guard helper would add a
# Python call per step on the engine thread (Guard.run costs ~100 ns more than the inline shape).


def install(settings: EmitterSettings, attach: Callable[[int], EventPublisher], detach: Callable[[], None]
            ) -> list[str]:
    """Wrap the V1 scheduler (``AsyncScheduler`` inherits these) and, when an engine core that
    published shuts down, let go of the publisher (the last one flushes it); returns what cannot
    be observed."""
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.engine.core import EngineCore

    observer = observer_lookup(settings, attach)
    # One guard per hook: a hook that fails stops alone, the others keep observing.
    hooks = (
        Hook(EngineCore, "shutdown", ("self",), "the last steps before shutdown (flushed at exit instead)",
             partial(_shutdown_wrapper, Guard("the flush at shutdown (EngineCore.shutdown)"), detach),
             lost="flush on engine shutdown"),
        Hook(Scheduler, "__init__", ("self", "vllm_config"), "nothing (the first step starts the publisher)",
             partial(_init_wrapper, Guard("the engine's start (Scheduler.__init__)"), observer),
             lost="publisher started with the engine"),
        Hook(Scheduler, "update_from_output", ("self", "scheduler_output", "model_runner_output"),
             "every speculative decoding outcome (no events at all)",
             partial(_update_wrapper, Guard("speculative decoding outcomes (Scheduler.update_from_output)"), observer),
             lost=ALL_OUTCOMES),
        Hook(Scheduler, "schedule", ("self",),
             "the step index of async outputs and the k_zero_reason length_trim under async scheduling",
             partial(_schedule_wrapper,
                     Guard("step indexes and requests without a draft slot (Scheduler.schedule)"), observer),
             lost="step index"),
        Hook(Scheduler, "update_draft_token_ids", ("self", "draft_token_ids"),
             "how many drafts were proposed (k_zero_reasons no_proposal, length_trim, schedule)",
             partial(_drafts_wrapper,
                     Guard("proposed and grammar-truncated drafts (Scheduler.update_draft_token_ids)"), observer),
             lost="k_zero_reasons"),
    )
    return [hook.lost for hook in hooks if not hook.wrap()]


def observer_lookup(settings: EmitterSettings, attach: Callable[[int], EventPublisher]) -> ObserverOf:
    """A scheduler -> its observer, made on first sight; None for a scheduler that does not draft."""

    def observer(scheduler: Any) -> EngineObserver | None:
        found = scheduler.__dict__.get(OBSERVER_ATTR, False)
        if found is False:
            spec = scheduler.vllm_config.speculative_config
            found = None if spec is None or not spec.num_speculative_tokens else EngineObserver(
                scheduler, settings, attach)
            setattr(scheduler, OBSERVER_ATTR, found)
        return found  # type: ignore[no-any-return]

    return observer


def _init_wrapper(guard: Guard, observer: ObserverOf, original: Callable[..., Any]) -> Callable[..., Any]:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        guard.run(observer, self)  # now, not in the first step: the observer and the publisher's threads start here

    return __init__


def _schedule_wrapper(guard: Guard, observer: ObserverOf, original: Callable[..., Any]) -> Callable[..., Any]:
    def schedule(self: Any, *args: Any, **kwargs: Any) -> Any:
        output = original(self, *args, **kwargs)
        if guard.enabled:
            try:
                obs = observer(self)
                if obs is not None:
                    setattr(output, TAG_ATTR, obs.tag(self, output))
            except Exception as exc:
                guard.failed(exc)
        return output

    return schedule


def _update_wrapper(guard: Guard, observer: ObserverOf, original: Callable[..., Any]) -> Callable[..., Any]:
    # Once observing the outcomes failed, each step's own counters of vLLM still go out (never blind).
    counts_only = Guard("vLLM's own counters after the outcomes' hook stopped (Scheduler.update_from_output)")

    def update_from_output(self: Any, scheduler_output: Any, model_runner_output: Any, *args: Any,
                           **kwargs: Any) -> Any:
        obs = seen = None
        if guard.enabled:
            try:
                obs = observer(self)
                if obs is not None:
                    seen = obs.before(self, scheduler_output, model_runner_output)
            except Exception as exc:
                obs = None
                guard.failed(exc)
        result = original(self, scheduler_output, model_runner_output, *args, **kwargs)
        if obs is not None and guard.enabled:
            try:
                obs.after(scheduler_output, model_runner_output, seen, result)
            except Exception as exc:
                guard.failed(exc)
        if not guard.enabled and counts_only.enabled:
            counts_only.run(publish_counts_only, self, result)
        return result

    return update_from_output


def publish_counts_only(scheduler: Any, outputs: Any) -> None:
    """Publish the step's ``SpecDecodingStats`` as a vLLM-only step (reason ``step_hook_disabled``)."""
    obs = scheduler.__dict__.get(OBSERVER_ATTR)
    stats = spec_decoding_stats(outputs)
    if not obs or stats is None or isinstance(stats, str):  # no observer, or nothing vLLM counted
        return
    if obs.counts_only is None:
        obs.counts_only = VllmOnlySteps(obs.context, obs.publisher, VllmOnlyReason.STEP_HOOK_DISABLED)
    obs.counts_only.publish(stats)


class VllmOnlySteps:
    """One engine's steps known only by vLLM's own counters: numbered from 0 under a boot id of their
    own (their event ids never meet those of steps observed before), each published with the reason."""

    def __init__(self, context: dict[str, Any], publisher: EventPublisher, reason: VllmOnlyReason) -> None:
        self.context = {**context, "boot": uuid.uuid4().hex[:16]}
        self.publisher = publisher
        self.reason = reason
        self.steps = itertools.count()

    def publish(self, stats: Any) -> None:
        """Publish a step of vLLM's ``SpecDecodingStats``."""
        self.publisher.publish((self.context, VllmOnlyStep(next(self.steps), time_ns() // 1000, self.reason, stats)))


def _drafts_wrapper(guard: Guard, observer: ObserverOf, original: Callable[..., Any]) -> Callable[..., Any]:
    def update_draft_token_ids(self: Any, draft_token_ids: Any, *args: Any, **kwargs: Any) -> Any:
        obs = proposed = None
        if guard.enabled:
            try:
                obs = observer(self)
                if obs is not None:
                    # Copied now (C-level passes): with the in-process engine core, the V1 runner
                    # hands over its live input_batch.req_ids, which the next steps reorder.
                    counts = list(map(len, draft_token_ids.draft_token_ids))
                    obs.proposed = (list(draft_token_ids.req_ids), counts)
                    grammar = self.structured_output_manager.backend is not None
                    proposed = counts if grammar else None
            except Exception as exc:
                guard.failed(exc)
        result = original(self, draft_token_ids, *args, **kwargs)
        if obs is not None and proposed is not None and guard.enabled:
            try:  # only grammars truncate drafts, and only while the request still holds them
                obs.truncated = grammar_truncations(self.structured_output_manager, self.requests,
                                                    draft_token_ids.req_ids, proposed)
            except Exception as exc:
                guard.failed(exc)
        return result

    return update_draft_token_ids


def _shutdown_wrapper(guard: Guard, detach: Callable[[], None], original: Callable[..., Any]) -> Callable[..., Any]:
    def shutdown(self: Any, *args: Any, **kwargs: Any) -> Any:
        # First: vLLM may kill the process while its executor shuts down. Tried at every engine
        # core's shutdown, even after one failed: each must let go of the publisher once.
        try:
            let_go(self, detach)
        except Exception as exc:
            guard.failed(exc)
        return original(self, *args, **kwargs)

    return shutdown


def let_go(engine_core: Any, detach: Callable[[], None]) -> None:
    """Detach an engine core whose scheduler published, once."""
    scheduler = getattr(engine_core, "scheduler", None)
    obs = None if scheduler is None else scheduler.__dict__.get(OBSERVER_ATTR)
    if obs and not obs.detached:
        obs.detached = True
        detach()
