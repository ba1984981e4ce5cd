"""Step events for tests: a valid one with every outcome kind, at a fixed time; any valid one
(hypothesis strategies, K = :data:`K`); a raw step as the engine thread publishes it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from specmetrics.emitter.outcomes import DraftDecision, RawStep
from specmetrics.schemas import StepEvent

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def step_event(outcomes: list[dict[str, Any]] | None = None, **envelope: Any) -> StepEvent:
    """A valid step event; keyword arguments override envelope fields."""
    fields: dict[str, Any] = {
        "event_id": "boot1-7", "engine_instance": "node-a", "dp_rank": 0, "model": "tiny-target",
        "vllm_version": "0.32.0", "method": "draft_model", "num_spec_tokens": 3, "drafter_max_len": 96,
        "step_index": 7, "event_time": T0, "batch_max_seq_len": 40,
        "outcomes": outcomes if outcomes is not None else [
            {"kind": "drafted", "request_id": "r1", "k_valid": 3, "accepted": 2, "emitted": 3},
            {"kind": "skipped_for_length", "request_id": "r2", "k_sched": 3, "k_valid": 3, "accepted": 0,
             "emitted": 1},
            {"kind": "grammar_invalid", "request_id": "r3", "k_sched": 3, "k_valid": 1, "k_invalid": 2,
             "accepted": 1, "emitted": 2},
            {"kind": "k_zero", "request_id": "r4", "reason": "no_proposal", "emitted": 1},
        ],
    }
    fields.update(envelope)
    return StepEvent.model_validate(fields)


#: The K of the drawn step events.
K = 5


@st.composite
def outcomes(draw: st.DrawFn, request_id: str) -> dict[str, Any]:
    """The JSON fields of one valid outcome of any kind (K = :data:`K`)."""
    kind = draw(st.sampled_from(["drafted", "skipped_for_length", "grammar_invalid", "grammar_rejected", "k_zero"]))
    if kind == "drafted":
        k_valid = draw(st.integers(1, K))
        accepted = draw(st.integers(0, k_valid))
        fields = {"k_valid": k_valid, "accepted": accepted}
    elif kind == "skipped_for_length":
        k_sched = draw(st.integers(0, K))
        k_valid = draw(st.integers(0, k_sched))
        accepted = draw(st.integers(0, k_valid))
        fields = {"k_sched": k_sched, "k_valid": k_valid, "accepted": accepted}
    elif kind == "grammar_invalid":
        k_invalid = draw(st.integers(1, K))
        k_valid = draw(st.integers(0, K - k_invalid))
        padded = draw(st.booleans()) or k_valid == 0
        accepted = draw(st.integers(0, k_valid))
        k_sched = k_valid + k_invalid if padded else k_valid
        fields = {"k_sched": k_sched, "k_valid": k_valid, "k_invalid": k_invalid, "accepted": accepted}
    elif kind == "grammar_rejected":
        k_valid = draw(st.integers(0, K - 1))
        accepted = draw(st.integers(0, k_valid))
        fields = {"k_sched": k_valid + 1, "k_valid": k_valid, "k_invalid": draw(st.integers(1, K - k_valid)),
                  "accepted": accepted}
    else:
        k_zero_reason = draw(st.sampled_from(["no_proposal", "length_trim", "grammar_truncated", "schedule", "unknown",
                                       "verify_budget", "skip_drafts"]))
        fields = {"reason": k_zero_reason,
                  "k_invalid": draw(st.integers(1, K)) if k_zero_reason == "grammar_truncated" else 0}
        if k_zero_reason == "verify_budget":
            k_sched = draw(st.integers(1, K))
            k_valid = draw(st.integers(0, k_sched))
            fields |= {"k_sched": k_sched, "k_valid": k_valid, "k_invalid": k_sched - k_valid}
        accepted = 0
    emitted = draw(st.integers(0, accepted + 1))
    seq_len = draw(st.none() | st.integers(0, 2**31 - 1))
    return {"kind": kind, "request_id": request_id, "emitted": emitted, "seq_len": seq_len, **fields}


@st.composite
def step_events(draw: st.DrawFn) -> StepEvent:
    """Any valid step event: up to 12 outcomes, envelope values across their whole ranges."""
    ids = draw(st.lists(st.text(min_size=1, max_size=40), max_size=12, unique=True))
    return step_event(
        [draw(outcomes(rid)) for rid in ids],
        num_spec_tokens=K,
        step_index=draw(st.integers(0, 2**62)),
        event_time=T0 + timedelta(microseconds=draw(st.integers(-(10**15), 10**15))),
        drafter_max_len=draw(st.none() | st.integers(1, 2**31 - 1)),
        batch_max_seq_len=draw(st.none() | st.integers(0, 2**31 - 1)),
        drafts_verified=draw(st.none() | st.integers(0, 2**31 - 1)),
        dropped_steps=draw(st.none() | st.integers(0, 2**63 - 1)),
        max_model_len=draw(st.none() | st.integers(0, 2**31 - 1)),
        context_cap_from=draw(st.none() | st.integers(0, 2**31 - 1)),
        skip_check=draw(st.none() | st.sampled_from(["observed", "none", "unobserved"])),
        engine_instance=draw(st.text(min_size=1, max_size=20)),
        dp_rank=draw(st.integers(0, 64)),
    )


def raw(**changes: Any) -> RawStep:
    """A RawStep of a sync step (fields as the engine thread publishes them), with ``changes``."""
    fields: dict[str, Any] = {
        "step_index": 9, "event_time_us": 1_700_000_000_000_000, "decision": DraftDecision(True, 40, 96),
        "num_scheduled": {"d": 4, "p": 30, "z": 1}, "scheduled_drafts": {"d": [5, 6, 7]}, "pads": None,
        "req_ids": ["d", "p", "z"], "sampled_before": [3, 1, 1], "sampled_after": [3, 1, 1],
        "decoding_without_drafts": {"z": 50}, "proposed": (["d", "z"], [3, 0]), "truncated": {},
        "max_model_len": 512, "num_sampled": 1, "step_k": 3, "asynchronous": False,
        "processed": None, "batch_decision": None, "after_drop": False, "verify_budget": None, "drafts_skipped": False,
        "seq_lens": [43, 30, 51], "vllm_counts": None, "vllm_finished": None,
    }
    fields.update(changes)
    return RawStep(**fields)
