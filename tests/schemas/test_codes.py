"""The outcome codes: the wire's and the stored data's integers, each tied to the contract's name."""

from __future__ import annotations

import numpy as np
import pytest

from specmetrics.schemas.codes import (
    K_ZERO_REASON_CODE,
    K_ZERO_REASON_CODES,
    KIND_CODE,
    KIND_CODES,
    OUTCOME_DTYPE,
    KindCode,
    KZeroReasonCode,
)
from specmetrics.schemas.events import KZeroReason, OutcomeKind
from specmetrics.schemas.wire import decode_step, step_event_to_wire
from tests.support.events import step_event

# What every message written so far carries: these numbers never change within a major version.
WIRE_KIND_CODES = {"drafted": 0, "skipped_for_length": 1, "grammar_invalid": 2, "k_zero": 3, "grammar_rejected": 4,
                   "vllm_only": 5}
WIRE_K_ZERO_REASON_CODES = {"no_proposal": 1, "length_trim": 2, "grammar_truncated": 3, "schedule": 4, "unknown": 5,
                     "verify_budget": 6, "skip_drafts": 7}


def test_the_codes_are_the_wire_codes_and_name_the_contracts_values() -> None:
    assert {OutcomeKind[code.name].value: code.value for code in KindCode} == WIRE_KIND_CODES
    assert {KZeroReason[code.name].value: code.value for code in KZeroReasonCode if code is not KZeroReasonCode.NONE} \
        == WIRE_K_ZERO_REASON_CODES
    assert KZeroReasonCode.NONE.value == 0


def test_every_contract_value_has_one_code_and_back() -> None:
    assert set(KIND_CODE) == set(OutcomeKind) and set(K_ZERO_REASON_CODE) == {*KZeroReason, None}
    assert all(KIND_CODES[code] is kind for kind, code in KIND_CODE.items())
    assert all(K_ZERO_REASON_CODES[code] is k_zero_reason for k_zero_reason, code in K_ZERO_REASON_CODE.items())
    assert all(type(code) is KindCode for code in KIND_CODE.values())
    assert all(type(code) is KZeroReasonCode for code in K_ZERO_REASON_CODE.values())


@pytest.mark.parametrize("k_zero_reason", list(KZeroReason))
def test_an_encoded_k_zero_carries_its_k_zero_reasons_wire_code(k_zero_reason: KZeroReason) -> None:
    outcome = {"kind": "k_zero", "request_id": "r", "reason": k_zero_reason.value, "k_sched": 0, "k_valid": 0,
               "k_invalid": 0, "emitted": 1}
    if k_zero_reason is KZeroReason.GRAMMAR_TRUNCATED:
        outcome["k_invalid"] = 2
    if k_zero_reason is KZeroReason.VERIFY_BUDGET:
        outcome.update(k_sched=3, k_valid=3)
    packed = np.frombuffer(decode_step(step_event_to_wire(step_event([outcome]))).outcomes, dtype=OUTCOME_DTYPE)
    assert packed[["kind", "k_zero_reason"]].tolist() == [
        (WIRE_KIND_CODES["k_zero"], WIRE_K_ZERO_REASON_CODES[k_zero_reason.value])]
