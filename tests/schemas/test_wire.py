"""The wire encoding: lossless round trips and clear reasons for broken messages."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings

from specmetrics.schemas import InvalidRecord, StepEvent, UnsupportedSchemaVersion, decode_step
from specmetrics.schemas.codes import OUTCOME_DTYPE
from specmetrics.schemas.wire import (
    FIELDS,
    MAX_EVENT_TIME_US,
    MIN_EVENT_TIME_US,
    step_event_from_wire,
    step_event_to_wire,
)
from tests.support.events import step_event, step_events


@settings(max_examples=300, deadline=None)
@given(step_events())
def test_round_trip_is_lossless(event: StepEvent) -> None:
    assert step_event_from_wire(step_event_to_wire(event)) == event


def test_decoded_step_exposes_raw_columns() -> None:
    event = step_event()
    step = decode_step(step_event_to_wire(event))
    packed = np.frombuffer(step.outcomes, dtype=OUTCOME_DTYPE)
    assert packed["kind"].tolist() == [0, 1, 2, 3]
    assert packed["k_sched"].tolist() == [3, 3, 3, 0]
    assert packed["k_valid"].tolist() == [3, 3, 1, 0]
    assert packed["accepted"].tolist() == [2, 0, 1, 0]
    assert step.context.engine_id == "node-a/dp0"
    assert step.envelope().event_time == event.event_time


def _message(**changes: Any) -> bytes:
    message = msgpack.unpackb(step_event_to_wire(step_event()))
    for key, value in changes.items():
        message[FIELDS.index(key)] = value
    return msgpack.packb(message)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"\xc1garbage", "not a msgpack step message"),
        (msgpack.packb({"a": 1}), "step message must be a msgpack array, got dict"),
        (msgpack.packb(["1.0", "e", "x"]), "step message has 3 fields; schema 1.x needs at least 16"),
        (_message(event_id=None), "'event_id' must be a string"),
        (_message(step_index=-1), "'step_index' must be a non-negative integer"),
        (_message(event_time_us="yesterday"), "'event_time_us' must be an integer"),
        (_message(step_index=2**63), "'step_index' must be a non-negative integer below 2\\*\\*63"),
        (_message(step_index=2**64 - 1), "'step_index' must be a non-negative integer below 2\\*\\*63"),
        (_message(event_time_us=MAX_EVENT_TIME_US + 1), "'event_time_us' must be an integer from 0001-01-01"),
        (_message(event_time_us=MIN_EVENT_TIME_US - 1), "'event_time_us' must be an integer from 0001-01-01"),
        (_message(event_time_us=2**64 - 1), "'event_time_us' must be an integer from 0001-01-01"),
        (_message(dp_rank=2**64 - 1), "invalid step envelope: dp_rank: Input should be less than or equal to 32767"),
        (_message(drafter_max_len=2**63), "invalid step envelope: drafter_max_len: Input should be less than"),
        (_message(batch_max_seq_len=2**64 - 1), "'batch_max_seq_len' must be null or an integer in \\[0, 2\\*\\*31\\)"),
        (_message(n=5), "'outcomes' must be n \\* 12 = 60 bytes"),
        (_message(outcomes=b"\x00" * 7), "'outcomes' must be n \\* 12 = 48 bytes"),
        (_message(request_id_offsets=b"\x01\x00\x00\x00" * 5), "must run from 0 to len"),
        (_message(model=""), "invalid step envelope: model: String should have at least 1 character"),
        (_message(dp_rank="0"), "invalid step envelope: dp_rank: Input should be a valid integer"),
        (_message(num_spec_tokens=None), "invalid step envelope: num_spec_tokens: Input should be a valid integer"),
        (_message(drafter_max_len=-5), "invalid step envelope: drafter_max_len: Input should be greater than"),
    ],
)
def test_broken_messages_are_rejected_with_the_reason(payload: bytes, reason: str) -> None:
    with pytest.raises(InvalidRecord, match=reason):
        decode_step(payload)


def test_the_extreme_step_index_and_event_times_are_accepted() -> None:
    first = decode_step(_message(step_index=0, event_time_us=MIN_EVENT_TIME_US))
    last = decode_step(_message(step_index=2**63 - 1, event_time_us=MAX_EVENT_TIME_US))
    assert first.envelope().event_time == datetime(1, 1, 1, tzinfo=UTC)
    assert (last.step_index, last.envelope().event_time) == (2**63 - 1, datetime(9999, 12, 31, 23, 59, 59, 999999,
                                                                                   tzinfo=UTC))


def test_unknown_major_version_is_rejected_before_anything_else() -> None:
    with pytest.raises(UnsupportedSchemaVersion, match="major version 2; this reader supports major version 1"):
        decode_step(_message(schema_version="2.0", model=""))


def test_readers_ignore_fields_appended_by_a_later_minor_version() -> None:
    message = msgpack.unpackb(step_event_to_wire(step_event()))
    message[0] = "1.4"
    message.append({"a": "future field"})
    assert decode_step(msgpack.packb(message)).context.schema_version == "1.4"


def test_a_schema_1_0_message_without_drafts_verified_is_read() -> None:
    message = msgpack.unpackb(step_event_to_wire(step_event(drafts_verified=7)))
    assert len(message) == len(FIELDS) and message[FIELDS.index("drafts_verified")] == 7
    message[0] = "1.0"
    step = decode_step(msgpack.packb(message[:FIELDS.index("drafts_verified")]))
    assert step.drafts_verified is None
    assert step.envelope().drafts_verified is None and step.envelope().schema_version == "1.0"


def test_a_schema_1_1_message_without_dropped_steps_is_read() -> None:
    message = msgpack.unpackb(step_event_to_wire(step_event(drafts_verified=7, dropped_steps=12)))
    assert message[FIELDS.index("dropped_steps")] == 12
    assert decode_step(msgpack.packb(message)).envelope().dropped_steps == 12
    message[0] = "1.1"
    step = decode_step(msgpack.packb(message[:FIELDS.index("dropped_steps")]))
    assert step.dropped_steps is None and step.drafts_verified == 7


def test_a_schema_1_2_message_without_the_context_cap_and_the_skip_check_is_read() -> None:
    message = msgpack.unpackb(step_event_to_wire(step_event(dropped_steps=12, max_model_len=96,
                                                            context_cap_from=256, skip_check="none")))
    step = decode_step(msgpack.packb(message))
    assert (step.context.max_model_len, step.context.context_cap_from, step.skip_check) == (96, 256, "none")
    message[0] = "1.2"
    step = decode_step(msgpack.packb(message[:FIELDS.index("max_model_len")]))
    assert (step.context.max_model_len, step.context.context_cap_from, step.skip_check) == (None, None, None)
    assert step.dropped_steps == 12 and step.envelope().skip_check is None


def test_a_schema_1_4_message_without_seq_lens_is_read() -> None:
    outcomes = [{"kind": "drafted", "request_id": "a", "k_valid": 3, "accepted": 2, "emitted": 3, "seq_len": 130},
                {"kind": "k_zero", "request_id": "b", "reason": "no_proposal", "emitted": 1}]
    message = msgpack.unpackb(step_event_to_wire(step_event(outcomes)))
    assert np.frombuffer(message[FIELDS.index("seq_lens")], dtype="<i4").tolist() == [130, -1]
    assert [o.seq_len for o in step_event_from_wire(msgpack.packb(message)).outcomes] == [130, None]
    message[0] = "1.4"
    step = decode_step(msgpack.packb(message[:FIELDS.index("seq_lens")]))
    assert step.seq_lens is None and step.context.schema_version == "1.4"
    assert step_event_from_wire(msgpack.packb(message[:FIELDS.index("seq_lens")])).outcomes[0].seq_len is None


def test_a_message_whose_outcomes_know_no_length_sends_none() -> None:
    message = msgpack.unpackb(step_event_to_wire(step_event()))
    assert len(message) == len(FIELDS) and message[FIELDS.index("seq_lens")] is None


@pytest.mark.parametrize("value", [b"\0" * 15, b"\0" * 17, "0000" * 4, [1, 2, 3, 4]])
def test_seq_lens_of_the_wrong_size_or_type_are_rejected(value: object) -> None:
    with pytest.raises(InvalidRecord, match="'seq_lens' must be null or n int32 values \\(16 bytes\\)"):
        decode_step(_message(seq_lens=value))


def test_a_seq_len_below_minus_one_is_rejected() -> None:
    lengths = np.array([5, -2, -1, 0], dtype="<i4").tobytes()
    with pytest.raises(InvalidRecord, match="outcome 1: seq_len must be a length"):
        step_event_from_wire(_message(seq_lens=lengths))


@pytest.mark.parametrize("value", ["seen", 1, b"none", {"a": 1}])
def test_an_unknown_skip_check_is_rejected(value: object) -> None:
    with pytest.raises(InvalidRecord, match="'skip_check' must be null or one of observed, none, unobserved"):
        decode_step(_message(skip_check=value))


@pytest.mark.parametrize("field", ["max_model_len", "context_cap_from"])
@pytest.mark.parametrize("value", [-1, 2**31, "3", 1.5])
def test_a_context_length_out_of_range_is_rejected(field: str, value: object) -> None:
    with pytest.raises(InvalidRecord, match=f"invalid step envelope: {field}"):
        decode_step(_message(**{field: value}))


@pytest.mark.parametrize("value", [-1, 2**63, "3", 1.5])
def test_dropped_steps_out_of_range_is_rejected(value: object) -> None:
    with pytest.raises(InvalidRecord, match="'dropped_steps' must be null or an integer in"):
        decode_step(_message(dropped_steps=value))


@pytest.mark.parametrize("value", [-1, 2**31, "3", 1.5])
def test_drafts_verified_out_of_range_is_rejected(value: object) -> None:
    with pytest.raises(InvalidRecord, match="'drafts_verified' must be null or an integer in"):
        decode_step(_message(drafts_verified=value))


def test_bad_outcome_values_are_reported_by_row() -> None:
    message = msgpack.unpackb(step_event_to_wire(step_event()))
    packed = np.frombuffer(message[FIELDS.index("outcomes")], dtype=OUTCOME_DTYPE).copy()
    packed["kind"][2] = 9
    message[FIELDS.index("outcomes")] = packed.tobytes()
    with pytest.raises(InvalidRecord, match="outcome 2: unknown outcome kind code"):
        step_event_from_wire(msgpack.packb(message))


def test_an_empty_message_is_rejected_as_empty() -> None:
    with pytest.raises(InvalidRecord) as raised:
        decode_step(b"")
    assert str(raised.value) == "empty message: 0 bytes"


VLLM_ONLY_STEP: dict[str, Any] = {
    "vllm_only": "step_hook_not_installed", "batch_max_seq_len": None,
    "vllm_counts": {"num_drafts": 2, "num_draft_tokens": 6, "num_accepted_tokens": 3,
                    "num_accepted_tokens_per_pos": [2, 1, 0]}}


def test_a_step_the_plugin_did_not_observe_travels_with_vllms_counters_and_its_reason() -> None:
    event = step_event([{"kind": "vllm_only", "request_id": "*", "emitted": 0}], **VLLM_ONLY_STEP)
    assert step_event_from_wire(step_event_to_wire(event)) == event
    step = decode_step(step_event_to_wire(event))
    assert step.vllm_only == "step_hook_not_installed" and step.vllm_counts == (2, 6, 3, (2, 1, 0))


@pytest.mark.parametrize(("change", "error"), [
    (lambda m: m.__setitem__(FIELDS.index("vllm_only"), "hook_tired"), "'vllm_only' must be null or one of"),
    (lambda m: m.__setitem__(FIELDS.index("vllm_counts"), None), "has one outcome (kind vllm_only"),
    (lambda m: m.__setitem__(FIELDS.index("request_id_data"), b"?"), "has one outcome (kind vllm_only"),
])
def test_a_step_marked_vllm_only_needs_its_one_outcome_and_vllms_counters(change: Any, error: str) -> None:
    event = step_event([{"kind": "vllm_only", "request_id": "*", "emitted": 0}], **VLLM_ONLY_STEP)
    message = msgpack.unpackb(step_event_to_wire(event))
    change(message)
    with pytest.raises(InvalidRecord, match=re.escape(error)):
        decode_step(msgpack.packb(message))


def test_an_vllm_only_outcome_only_stands_for_a_step_marked_so() -> None:
    with pytest.raises(ValueError, match="only such a step has one"):
        step_event([{"kind": "vllm_only", "request_id": "*", "emitted": 0}])
    with pytest.raises(ValueError, match="only such a step has one"):
        step_event(**VLLM_ONLY_STEP)
