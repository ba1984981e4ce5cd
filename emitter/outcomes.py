"""Classifying a step's requests: what the scheduler saw at one step → one outcome per request
(docs/design.md#events).

Pure logic on plain values, no vLLM import. The engine thread only takes references and
lengths (a plain tuple in :class:`RawStep` order); :class:`emitter.step_events.StepEvents`
turns them into an envelope and outcome columns on the publisher's thread. The state that
links one step to the next on the engine thread (the worker's drafting decision, the drafts
proposed and the ones the grammar truncated) is swapped per step, so a step dropped from a
full queue never corrupts the next one; the decision each request's drafts came with is kept
per request on the publisher's thread."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from specmetrics.schemas.codes import UNKNOWN_SEQ_LEN, KindCode, KZeroReasonCode
from specmetrics.schemas.wire import OutcomeColumns

# The codes as plain ints, bound once: the loop below runs per request, where reading an enum
# member costs an attribute lookup and numpy packs int subclasses at half the speed of ints.
_DRAFTED = KindCode.DRAFTED.value
_SKIPPED = KindCode.SKIPPED_FOR_LENGTH.value
_GRAMMAR_INVALID = KindCode.GRAMMAR_INVALID.value
_GRAMMAR_REJECTED = KindCode.GRAMMAR_REJECTED.value
_K_ZERO = KindCode.K_ZERO.value
_NONE = KZeroReasonCode.NONE.value
_NO_PROPOSAL = KZeroReasonCode.NO_PROPOSAL.value
_LENGTH_TRIM = KZeroReasonCode.LENGTH_TRIM.value
_GRAMMAR_TRUNCATED = KZeroReasonCode.GRAMMAR_TRUNCATED.value
_SCHEDULE = KZeroReasonCode.SCHEDULE.value
_UNKNOWN = KZeroReasonCode.UNKNOWN.value
_VERIFY_BUDGET = KZeroReasonCode.VERIFY_BUDGET.value
_SKIP_DRAFTS = KZeroReasonCode.SKIP_DRAFTS.value


class DraftDecision(NamedTuple):
    """The worker's batch-wide choice after a step: did the drafter run for the next drafts?"""

    fits: bool
    max_seq_len: int
    drafter_max_len: int


class RawStep(NamedTuple):
    """One step as the scheduler saw it: references to its own per-step objects, and lengths. The
    engine thread publishes it as a plain tuple in this field order
    (:meth:`emitter.vllm.scheduler.EngineObserver.after`)."""

    step_index: int
    event_time_us: int
    decision: DraftDecision | None  # made after the previous step: describes the drafts verified now
    num_scheduled: dict[str, int]  # SchedulerOutput.num_scheduled_tokens
    scheduled_drafts: dict[str, list[int]]  # SchedulerOutput.scheduled_spec_decode_tokens
    pads: dict[str, int] | None  # SchedulerOutput.num_invalid_spec_tokens (async -1 pads)
    req_ids: list[str]  # ModelRunnerOutput.req_ids: the rows of the sampled lists
    sampled_before: list[int]  # len of each sampled list before stop handling
    sampled_after: list[int]  # ... and after (what was emitted)
    decoding_without_drafts: dict[str, int]  # request -> computed positions, for 1-token decode steps
    proposed: tuple[list[str], list[int]] | None  # request ids and draft counts proposed after the previous step
    truncated: dict[str, tuple[int, int, int]]  # (proposed, kept, valid) where the grammar cut or kept invalid ones
    max_model_len: int
    num_sampled: int  # tokens sampled per step without drafts (1)
    step_k: int | None  # the previous step's SchedulerOutput.num_spec_tokens_to_schedule: the K it chose
    asynchronous: bool  # async scheduling: placeholders for every decoding request, no proposal lists
    processed: list[str] | None  # async: the requests update_from_output returned an output for (None: all)
    batch_decision: DraftDecision | None  # made after this step: the drafts of the requests it scheduled
    after_drop: bool  # this engine's previous step was dropped from a full queue
    verify_budget: int | None  # V2 adaptive verification: the drafts verified this step, of scheduled_drafts
    drafts_skipped: bool  # the previous step's SchedulerOutput.skip_drafts (0.33 on): the drafter proposed none
    seq_lens: list[int]  # the scheduled requests' lengths once this step ran, in num_scheduled order
    #: vLLM's own SpecDecodingStats of the step (None: it counted no draft), or why there is none
    #: (a schemas.events.VllmCountsMissing value)
    vllm_counts: Any
    #: With vLLM's per-request metrics on: (request id, its RequestSpecDecodeMetrics) of each request that
    #: finished at the step; None when they are off
    vllm_finished: list[tuple[str, Any]] | None


def step_outcomes(raw: RawStep, held: Mapping[str, DraftDecision | None] | None = None,
                  lengths: Mapping[str, int] | None = None) -> OutcomeColumns:
    """One outcome per request verified (or left without drafts) at this step. ``held``: per
    request, the decision about the drafts it holds (made after the last step that scheduled it);
    a request missing there takes the previous step's (``raw.decision``). ``lengths``: per request,
    its length at that step (the outcome's ``seq_len``; not known where missing)."""
    held = held or {}
    lengths = lengths or {}
    pads = raw.pads or {}
    ids: list[str] = []
    kind: list[int] = []
    k_zero_reason: list[int] = []
    k_sched: list[int] = []
    k_valid: list[int] = []
    k_invalid: list[int] = []
    accepted: list[int] = []
    emitted: list[int] = []
    seq_len: list[int] = []
    proposals: dict[str, int] | None = None  # built on the first request without drafts
    processed = None if raw.processed is None else set(raw.processed)
    # From req_ids, as vLLM's scheduler does since 0.34 (which dropped ModelRunnerOutput.req_id_to_index).
    row_of = {request_id: i for i, request_id in enumerate(raw.req_ids)}
    none_verified = raw.verify_budget == 0
    for request_id, num_scheduled in raw.num_scheduled.items():
        drafts = raw.scheduled_drafts.get(request_id)
        if not drafts and (num_scheduled != 1 or request_id not in raw.decoding_without_drafts):
            continue  # prefill
        if processed is not None and request_id not in processed:
            continue  # finished or aborted while its step was in flight (async, PP): vLLM skipped it too
        i = row_of.get(request_id)
        if i is None or not raw.sampled_before[i]:
            continue  # nothing verified (vLLM counts nothing either)
        k = len(drafts) if drafts else 0
        acc = max(raw.sampled_before[i] - raw.num_sampled, 0) if k else 0
        pad = pads.get(request_id, 0)
        proposed, kept, valid = raw.truncated.get(request_id, (0, 0, 0))
        decision = held.get(request_id, raw.decision)
        if decision is not None and not decision.fits:
            row = (_SKIPPED, _NONE, k, k - pad, pad, acc)
        elif k and none_verified:  # scheduled (vLLM counts them), none verified
            row = (_K_ZERO, _VERIFY_BUDGET, k, k - pad, pad, 0)
        elif k == 0:
            if proposals is None:
                ids_, counts = raw.proposed or ([], [])
                proposals = dict(zip(ids_, counts, strict=False))
            why = _k_zero_reason(raw, request_id, proposals)
            row = (_K_ZERO, why, 0, 0, proposed - kept if why == _GRAMMAR_TRUNCATED else 0, 0)
        elif pad:
            row = (_GRAMMAR_INVALID, _NONE, k, k - pad, pad, acc)
        elif k > valid and request_id in raw.truncated:  # vLLM 0.34 on: the first invalid draft verified
            row = (_GRAMMAR_REJECTED, _NONE, k, valid, proposed - valid, acc)
        elif proposed > valid:
            row = (_GRAMMAR_INVALID, _NONE, k, k, proposed - valid, acc)
        else:
            row = (_DRAFTED, _NONE, k, k, 0, acc)
        ids.append(request_id)
        kind.append(row[0])
        k_zero_reason.append(row[1])
        k_sched.append(row[2])
        k_valid.append(row[3])
        k_invalid.append(row[4])
        accepted.append(row[5])
        emitted.append(raw.sampled_after[i])
        seq_len.append(lengths.get(request_id, UNKNOWN_SEQ_LEN))
    return OutcomeColumns(ids, kind, k_zero_reason, k_sched, k_valid, k_invalid, accepted, emitted, seq_len)


def _k_zero_reason(raw: RawStep, request_id: str, proposals: dict[str, int]) -> int:
    if raw.drafts_skipped:  # the scheduler told the drafter no drafts would be used (vLLM 0.33 on)
        return _SKIP_DRAFTS
    if raw.step_k == 0:  # dynamic K chose 0 for the drafts verified now (the drafter got K = 0)
        return _SCHEDULE
    if request_id in raw.truncated and raw.truncated[request_id][1] == 0:
        return _GRAMMAR_TRUNCATED
    if not raw.asynchronous:  # async gives every decoding request placeholders: the drafter is not the cause
        proposed = proposals.get(request_id)
        if proposed is None:
            return _UNKNOWN
        if proposed == 0:
            return _NO_PROPOSAL
    # schedule() caps a step at max_model_len - computed - num_sampled tokens: drafts go first
    if raw.decoding_without_drafts[request_id] + raw.num_sampled >= raw.max_model_len:
        return _LENGTH_TRIM
    return _SCHEDULE  # the token budget
