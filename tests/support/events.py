"""Step events for tests: a valid one with every outcome kind, at a fixed time."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from schemas import StepEvent

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
