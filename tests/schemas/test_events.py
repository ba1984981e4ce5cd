"""The pydantic contract: what is accepted, and the precise reasons for what is not."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from specmetrics.schemas import (
    SCHEMA_VERSION,
    KZero,
    KZeroReason,
    StepEvent,
    UnsupportedSchemaVersion,
    check_schema_version,
    step_event_json_schema,
)
from specmetrics.schemas.wire import step_event_from_wire, step_event_to_wire
from tests.support.events import step_event


def test_valid_event_keeps_every_kind() -> None:
    event = step_event()
    assert [o.kind for o in event.outcomes] == ["drafted", "skipped_for_length", "grammar_invalid", "k_zero"]
    assert event.engine_id == "node-a/dp0"
    assert event.schema_version == SCHEMA_VERSION


def test_a_grammar_rejected_outcome_round_trips_through_the_wire() -> None:
    rejected = {"kind": "grammar_rejected", "request_id": "r5", "k_sched": 2, "k_valid": 1, "k_invalid": 2,
                "accepted": 1, "emitted": 2}
    event = step_event([rejected])
    assert event.outcomes[0].model_dump() == {**rejected, "seq_len": None}
    assert step_event_from_wire(step_event_to_wire(event)) == event


@pytest.mark.parametrize(
    ("outcome", "message"),
    [
        ({"kind": "drafted", "request_id": "r", "k_valid": 2, "accepted": 3, "emitted": 1},
         "accepted (3) exceeds k_valid (2)"),
        ({"kind": "drafted", "request_id": "r", "k_valid": 0, "accepted": 0, "emitted": 1},
         "Input should be greater than 0"),
        ({"kind": "drafted", "request_id": "r", "k_valid": 3, "accepted": 1, "emitted": 3},
         "emitted (3) exceeds accepted + 1 (2)"),
        ({"kind": "skipped_for_length", "request_id": "r", "k_sched": 2, "k_valid": 3, "accepted": 0, "emitted": 1},
         "k_valid (3) exceeds k_sched (2)"),
        ({"kind": "grammar_invalid", "request_id": "r", "k_sched": 2, "k_valid": 1, "k_invalid": 2, "accepted": 0,
          "emitted": 1}, "k_sched (2) must equal k_valid (1) (sync) or k_valid + k_invalid (3) (async)"),
        ({"kind": "grammar_rejected", "request_id": "r", "k_sched": 3, "k_valid": 1, "k_invalid": 2, "accepted": 0,
          "emitted": 1}, "k_sched (3) must equal k_valid + 1 (2)"),
        ({"kind": "grammar_rejected", "request_id": "r", "k_sched": 2, "k_valid": 1, "k_invalid": 0, "accepted": 0,
          "emitted": 1}, "Input should be greater than 0"),
        ({"kind": "grammar_rejected", "request_id": "r", "k_sched": 2, "k_valid": 1, "k_invalid": 1, "accepted": 2,
          "emitted": 1}, "accepted (2) exceeds k_valid (1)"),
        ({"kind": "k_zero", "request_id": "r", "reason": "schedule", "k_invalid": 2, "emitted": 1},
         "k_invalid > 0 is only allowed with reason 'grammar_truncated' or 'verify_budget'"),
        ({"kind": "k_zero", "request_id": "r", "reason": "schedule", "k_sched": 2, "k_valid": 2, "emitted": 1},
         "k_sched and k_valid > 0 are only allowed with reason 'verify_budget'"),
        ({"kind": "k_zero", "request_id": "r", "reason": "verify_budget", "emitted": 1},
         "reason 'verify_budget' needs k_sched > 0"),
        ({"kind": "k_zero", "request_id": "r", "reason": "verify_budget", "k_sched": 3, "k_valid": 3, "k_invalid": 1,
          "emitted": 1}, "reason 'verify_budget' needs k_valid + k_invalid == k_sched, got 3 + 1 != 3"),
        ({"kind": "k_zero", "request_id": "r", "reason": "grammar_truncated", "emitted": 1},
         "reason 'grammar_truncated' needs k_invalid > 0"),
        ({"kind": "k_zero", "request_id": "r", "reason": "bored", "emitted": 1}, "Input should be 'no_proposal'"),
        ({"kind": "teleported", "request_id": "r", "emitted": 1}, "does not match any of the expected tags"),
        ({"kind": "drafted", "request_id": "", "k_valid": 1, "accepted": 0, "emitted": 1},
         "String should have at least 1 character"),
    ],
)
def test_invalid_outcome_says_why(outcome: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+")):
        step_event([outcome])


def test_draft_slots_cannot_exceed_k() -> None:
    with pytest.raises(ValidationError, match="4 draft slots exceed K=3"):
        step_event([{"kind": "drafted", "request_id": "r", "k_valid": 4, "accepted": 0, "emitted": 1}])


def test_request_ids_are_unique_within_a_step() -> None:
    drafted = {"kind": "drafted", "request_id": "same", "k_valid": 1, "accepted": 0, "emitted": 1}
    with pytest.raises(ValidationError, match="request_id 'same' appears twice in one step"):
        step_event([drafted, drafted])


def test_event_time_must_carry_a_time_zone_and_is_stored_in_utc() -> None:
    with pytest.raises(ValidationError, match="timezone"):
        step_event(event_time="2026-11-30T12:00:00")
    assert step_event(event_time="2026-11-30T14:00:00+02:00").event_time.isoformat() == "2026-11-30T12:00:00+00:00"


@pytest.mark.parametrize("version", ["2.0", "0.9", "1", "x.y", 1.0])
def test_unknown_major_versions_are_rejected_with_the_reason(version: object) -> None:
    with pytest.raises(UnsupportedSchemaVersion):
        check_schema_version(version)
    with pytest.raises(ValidationError, match="schema_version"):
        step_event(schema_version=version)


def test_later_minor_version_of_the_same_major_is_accepted() -> None:
    assert step_event(schema_version="1.7").schema_version == "1.7"


def test_json_schema_lists_the_kinds_and_the_k_zero_reasons() -> None:
    schema = step_event_json_schema()
    text = json.dumps(schema)
    for name in ("drafted", "skipped_for_length", "grammar_invalid", "k_zero", "grammar_rejected", "no_proposal",
                 "length_trim", "grammar_truncated", "schedule", "unknown", "verify_budget", "skip_drafts",
                 "drafts_verified"):
        assert f'"{name}"' in text
    outcomes = schema["properties"]["outcomes"]["items"]  # type: ignore[index]
    assert outcomes["discriminator"]["propertyName"] == "kind"
    assert schema["$id"].endswith(f"/{SCHEMA_VERSION}")  # type: ignore[union-attr]


def test_k_zero_reason_keeps_its_json_name_reason_within_major_1() -> None:
    event = step_event()
    k_zero = event.outcomes[3]
    assert isinstance(k_zero, KZero) and k_zero.k_zero_reason is KZeroReason.NO_PROPOSAL
    written = event.model_dump_json()
    assert '"reason":"no_proposal"' in written and "k_zero_reason" not in written
    assert StepEvent.model_validate_json(written) == event
    schema = step_event_json_schema()
    assert "reason" in schema["$defs"]["KZero"]["properties"]  # type: ignore[index]
    assert "k_zero_reason" not in json.dumps(schema)
    with pytest.raises(ValidationError, match="k_zero_reason"):
        step_event([{"kind": "k_zero", "request_id": "r", "k_zero_reason": "no_proposal", "emitted": 1}])
