"""The vectorised outcome rules give the same verdict as the pydantic models, row by row."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from specmetrics.schemas import StepEvent, decode_step
from specmetrics.schemas.codes import OUTCOME_COLUMNS, OUTCOME_DTYPE, KindCode, KZeroReasonCode
from specmetrics.schemas.events import ALL_REQUESTS, VllmOnlyReason
from specmetrics.schemas.validation import invalid_outcome_rows
from specmetrics.schemas.wire import _outcome_dict, step_event_to_wire
from tests.support.events import K as K_WIRE
from tests.support.events import step_event, step_events

K = 4
K_ZERO_REASONS = set(KZeroReasonCode) - {KZeroReasonCode.NONE}
rows = st.fixed_dictionaries({
    "kind": st.integers(0, len(KindCode)),  # one unknown code too
    "k_zero_reason": st.integers(0, len(KZeroReasonCode)),
    "k_sched": st.integers(-1, K + 1),
    "k_valid": st.integers(-1, K + 1),
    "k_invalid": st.integers(-1, K + 1),
    "accepted": st.integers(-1, K + 1),
    "emitted": st.integers(-1, K + 2),
    "seq_len": st.integers(-2, 3),  # -1: not known
    "vllm_only": st.integers(0, 1),  # the row's step has a vllm_only reason (schema 1.8)
})


def pydantic_accepts(row: dict[str, int], k: int = K) -> bool:
    if row["kind"] not in set(KindCode) or (
            row["kind"] == KindCode.K_ZERO and row["k_zero_reason"] not in K_ZERO_REASONS):
        return False
    vllm_only = bool(row.get("vllm_only"))
    outcome: dict[str, Any] = _outcome_dict(ALL_REQUESTS if row["kind"] == KindCode.VLLM_ONLY else "r", row)
    # The wire carries every column for every kind: the columns a kind does not have must hold
    # exactly what the encoder writes for it.
    no_k_zero_reason = KZeroReasonCode.NONE
    implied = {
        KindCode.DRAFTED: {"k_sched": row["k_valid"], "k_invalid": 0, "k_zero_reason": no_k_zero_reason},
        KindCode.SKIPPED_FOR_LENGTH: {"k_invalid": row["k_sched"] - row["k_valid"], "k_zero_reason": no_k_zero_reason},
        KindCode.GRAMMAR_INVALID: {"k_zero_reason": no_k_zero_reason},
        KindCode.GRAMMAR_REJECTED: {"k_zero_reason": no_k_zero_reason},
        KindCode.VLLM_ONLY: {"k_zero_reason": no_k_zero_reason, "k_sched": 0, "k_valid": 0, "k_invalid": 0,
                              "accepted": 0},
        KindCode.K_ZERO: {"accepted": 0} if row["k_zero_reason"] == KZeroReasonCode.VERIFY_BUDGET
        else {"k_sched": 0, "k_valid": 0, "accepted": 0},
    }[row["kind"]]
    if any(row[name] != value for name, value in implied.items()):
        return False
    try:
        step_event([outcome], num_spec_tokens=k, vllm_only=VllmOnlyReason.STEP_HOOK_OFF if vllm_only else None)
    except ValidationError:
        return False
    return True


@settings(max_examples=1500, deadline=None)
@given(st.lists(rows, min_size=1, max_size=20))
def test_vectorised_rules_match_the_models(batch: list[dict[str, int]]) -> None:
    cols = {name: np.array([r[name] for r in batch], dtype=np.int64) for name in (*OUTCOME_COLUMNS, "seq_len")}
    cols["vllm_only"] = np.array([r["vllm_only"] for r in batch], dtype=bool)
    bad, reasons = invalid_outcome_rows(cols, np.full(len(batch), K))
    for i, row in enumerate(batch):
        assert bool(bad[i]) is not pydantic_accepts(row), (row, reasons.get(i))
        assert (i in reasons) is bool(bad[i])


@settings(max_examples=200, deadline=None)
@given(step_events())
def test_valid_events_pass_the_vectorised_rules(event: StepEvent) -> None:
    step = decode_step(step_event_to_wire(event))
    packed = np.frombuffer(step.outcomes, dtype=OUTCOME_DTYPE)
    bad, reasons = invalid_outcome_rows({n: packed[n] for n in OUTCOME_COLUMNS}, np.full(step.n, K_WIRE))
    assert not bad.any(), reasons


#: The contract's largest count (NonNegInt) and K; the wire holds counts as int16.
BOUND = 32767
near_the_bound = st.fixed_dictionaries({
    "kind": st.sampled_from([int(code) for code in KindCode]),
    "k_zero_reason": st.sampled_from([int(code) for code in KZeroReasonCode]),
    **{name: st.integers(BOUND - 1, BOUND) | st.just(0) for name in ("k_sched", "k_valid", "k_invalid", "accepted")},
    "emitted": st.integers(BOUND - 1, BOUND) | st.just(0),
    "seq_len": st.just(-1),
})


@settings(max_examples=500, deadline=None)
@given(st.lists(near_the_bound, min_size=1, max_size=10))
def test_the_rules_hold_at_the_contracts_bounds_in_the_wires_own_types(batch: list[dict[str, int]]) -> None:
    """accepted = 32,767 with emitted = 32,767 is valid: accepted + 1 computed in int16 wrapped to -32,768."""
    packed = np.zeros(len(batch), dtype=OUTCOME_DTYPE)
    for name in OUTCOME_COLUMNS:
        packed[name] = [row[name] for row in batch]
    cols = {name: packed[name] for name in OUTCOME_COLUMNS}
    cols["seq_len"] = np.full(len(batch), -1, dtype=np.int32)
    bad, reasons = invalid_outcome_rows(cols, np.full(len(batch), BOUND, dtype=np.int16))
    for i, row in enumerate(batch):
        assert bool(bad[i]) is not pydantic_accepts(row, BOUND), (row, reasons.get(i))


def test_a_drafted_outcome_at_the_bound_is_valid() -> None:
    packed = np.zeros(1, dtype=OUTCOME_DTYPE)
    packed[0] = (int(KindCode.DRAFTED), 0, BOUND, BOUND, 0, BOUND, BOUND)
    cols = {name: packed[name] for name in OUTCOME_COLUMNS}
    bad, reasons = invalid_outcome_rows(cols, np.full(1, BOUND, dtype=np.int16))
    assert not bad.any(), reasons
