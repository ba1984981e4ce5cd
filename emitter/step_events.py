"""What the engine thread published -> step events, in step order on the publisher's thread.

The worker decides batch-wide after each step whether the drafter ran (``DraftDecision``); the
drafts a request verifies come from the last step that scheduled it, which is not always the
previous step (the token budget may leave a request out of a step). So the decision that applies
to a request is remembered per engine and request, with the request's length at that step (the
outcome's ``seq_len``). Past a cap (finished requests are not tracked) only the current step's
requests are kept; after a step dropped from a full queue none are (the dropped step's decisions
are unknown), and requests fall back to the previous step's decision, which the engine thread
always carries.
"""

from __future__ import annotations

from itertools import repeat
from typing import Any, NamedTuple

from specmetrics.emitter.outcomes import DraftDecision, RawStep, step_outcomes
from specmetrics.schemas.codes import KindCode, KZeroReasonCode
from specmetrics.schemas.events import ALL_REQUESTS, SkipCheck, VllmCountsMissing, VllmOnlyReason
from specmetrics.schemas.wire import OutcomeColumns, VllmCountTuple

Event = tuple[dict[str, Any], OutcomeColumns]
#: The one outcome of a step the plugin did not observe.
_VLLM_ONLY = OutcomeColumns([ALL_REQUESTS], [KindCode.VLLM_ONLY.value], [KZeroReasonCode.NONE.value], [0], [0],
                             [0], [0], [0])


class VllmOnlyStep(NamedTuple):
    """A step seen only through vLLM's stat logger: its ``SpecDecodingStats`` and why no outcome is known."""

    step_index: int
    event_time_us: int
    reason: VllmOnlyReason
    stats: Any  # vLLM's SpecDecodingStats


class StepEvents:
    """The publisher's ``to_event``: ``(context, values)`` -> (envelope, outcomes), or None when no
    request was verified. Not thread-safe: one publisher thread calls it, steps in order."""

    def __init__(self, max_requests: int = 1 << 16) -> None:
        self._held: dict[str, dict[str, DraftDecision | None]] = {}  # per engine (boot id)
        self._lengths: dict[str, dict[str, int]] = {}  # per engine: each request's length at that decision
        self._max_requests = max_requests

    def __call__(self, item: tuple[dict[str, Any], tuple[Any, ...]]) -> Event | None:
        context, values = item
        if type(values) is VllmOnlyStep:
            return _vllm_only_event(context, values)
        raw = RawStep._make(values)
        decision = _decision(raw.decision)
        boot = str(context["boot"])
        held = self._held.setdefault(boot, {})
        lengths = self._lengths.setdefault(boot, {})
        if raw.after_drop:
            held.clear()
            lengths.clear()
        outcomes = step_outcomes(raw._replace(decision=decision), held, lengths)
        skip_check = _skip_check(context, decision, held, outcomes.request_id)
        held.update(zip(raw.num_scheduled, repeat(_decision(raw.batch_decision))))
        lengths.update(zip(raw.num_scheduled, raw.seq_lens, strict=True))
        if len(held) > self._max_requests:
            self._held[boot] = {request_id: held[request_id] for request_id in raw.num_scheduled}
            self._lengths[boot] = dict(zip(raw.num_scheduled, raw.seq_lens, strict=True))
        if not outcomes.request_id:
            return None
        envelope = _envelope(
            context, raw.step_index, raw.event_time_us, raw.vllm_counts,
            drafts_verified=_partly_verified(raw.verify_budget, raw.scheduled_drafts), skip_check=skip_check.value,
            vllm_finished=None if raw.vllm_finished is None else [
                (request_id, tuple(metrics.histogram), int(metrics.num_draft_tokens),
                 tuple(metrics.per_step_accepted), tuple(metrics.per_step_drafted))
                for request_id, metrics in raw.vllm_finished])
        if decision is not None:
            envelope["drafter_max_len"] = decision.drafter_max_len
            if decision.max_seq_len >= 0:
                envelope["batch_max_seq_len"] = decision.max_seq_len
        return envelope, outcomes


def _vllm_only_event(context: dict[str, Any], step: VllmOnlyStep) -> Event:
    return _envelope(context, step.step_index, step.event_time_us, step.stats, vllm_only=step.reason), _VLLM_ONLY


def _envelope(context: dict[str, Any], step_index: int, event_time_us: int, vllm_stats: Any,
              **fields: Any) -> dict[str, Any]:
    """A step's envelope: the engine's context but what only the plugin reads (its boot id makes the
    event id), the step, vLLM's own counters of it, and ``fields``."""
    envelope = {key: value for key, value in context.items() if key not in ("boot", "runner_v2")}
    envelope.update(event_id=f"{context['boot']}-{step_index}", step_index=step_index, event_time_us=event_time_us,
                    batch_max_seq_len=None, vllm_counts=_vllm_counts(vllm_stats, int(context["num_spec_tokens"])),
                    **fields)
    return envelope


def _skip_check(context: dict[str, Any], decision: DraftDecision | None,
                held: dict[str, DraftDecision | None], request_ids: Any) -> SkipCheck:
    """Whether a skip for length could be seen for every request verified at the step: the worker's
    decision about its drafts arrived (V1), or the runner never skips (V2)."""
    if context.get("runner_v2"):
        return SkipCheck.NONE
    if all(held.get(request_id, decision) is not None for request_id in request_ids):
        return SkipCheck.OBSERVED
    return SkipCheck.UNOBSERVED


def _partly_verified(budget: int | None, scheduled_drafts: dict[str, list[int]]) -> int | None:
    """The step's verified drafts when adaptive verification verified some, not all, of those scheduled."""
    if not budget or budget >= sum(map(len, scheduled_drafts.values())):
        return None
    return budget


def _vllm_counts(stats: Any, k: int) -> VllmCountTuple | VllmCountsMissing:
    """vLLM's own counters of the step from its ``SpecDecodingStats`` (None: vLLM counted no draft: all
    zero, as ``SpecDecodingStats.new``), or why there are none."""
    if isinstance(stats, str):
        return VllmCountsMissing(stats)
    if stats is None:
        return 0, 0, 0, (0,) * k
    return (int(stats.num_drafts), int(stats.num_draft_tokens), int(stats.num_accepted_tokens),
            tuple(map(int, stats.num_accepted_tokens_per_pos)))


def _decision(value: Any) -> DraftDecision | None:
    """The worker sends a plain ``(fits, max_seq_len, drafter_max_len)`` tuple."""
    return None if value is None else DraftDecision._make(value)
