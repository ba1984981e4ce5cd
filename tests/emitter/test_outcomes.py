"""Classification of request-steps (pure logic; the real-vLLM tests prove the inputs)."""

from __future__ import annotations

from typing import Any

from specmetrics.emitter.outcomes import DraftDecision, RawStep, step_outcomes
from specmetrics.schemas.codes import K_ZERO_REASON_CODES, KIND_CODES
from tests.support.events import raw


def rows(step: RawStep, held: dict[str, DraftDecision | None] | None = None) -> dict[str, tuple[Any, ...]]:
    out = step_outcomes(step, held)
    return {rid: (KIND_CODES[out.kind[i]].value, K_ZERO_REASON_CODES[out.k_zero_reason[i]], out.k_sched[i],
                  out.k_valid[i], out.k_invalid[i], out.accepted[i], out.emitted[i])
            for i, rid in enumerate(out.request_id)}


def test_drafted_and_k_zero_no_proposal_and_prefill_left_out() -> None:
    assert rows(raw()) == {"d": ("drafted", None, 3, 3, 0, 2, 3), "z": ("k_zero", "no_proposal", 0, 0, 0, 0, 1)}


def test_skip_decision_marks_every_verified_request() -> None:
    got = rows(raw(decision=DraftDecision(False, 121, 96)))
    assert got == {"d": ("skipped_for_length", None, 3, 3, 0, 2, 3), "z": ("skipped_for_length", None, 0, 0, 0, 0, 1)}


def test_async_pads_and_sync_truncation_are_grammar_invalid() -> None:
    assert rows(raw(pads={"d": 2}))["d"] == ("grammar_invalid", None, 3, 1, 2, 2, 3)
    assert rows(raw(truncated={"d": (5, 3, 3)}))["d"] == ("grammar_invalid", None, 3, 3, 2, 2, 3)


def test_a_verified_invalid_draft_is_grammar_rejected() -> None:
    # vLLM 0.34 on (sync): 3 of 4 proposed kept, the last kept broke the grammar; vLLM counts 3 drafts,
    # 2 of them obeyed the grammar, 2 broke it (the one verified and the one cut)
    assert rows(raw(truncated={"d": (4, 3, 2)}))["d"] == ("grammar_rejected", None, 3, 2, 2, 2, 3)
    # nothing cut, the last proposed broke it
    assert rows(raw(truncated={"d": (3, 3, 2)}))["d"] == ("grammar_rejected", None, 3, 2, 1, 2, 3)
    # the schedule dropped the invalid one (3 kept, 3 valid): only valid drafts verified
    assert rows(raw(truncated={"d": (5, 4, 3)}))["d"] == ("grammar_invalid", None, 3, 3, 2, 2, 3)


def test_a_zero_verify_budget_makes_scheduled_drafts_k_zero_verify_budget() -> None:
    got = rows(raw(verify_budget=0, pads={"d": 1}, sampled_before=[1, 1, 1], sampled_after=[1, 1, 1]))
    assert got == {"d": ("k_zero", "verify_budget", 3, 2, 1, 0, 1), "z": ("k_zero", "no_proposal", 0, 0, 0, 0, 1)}
    # a partial budget leaves the outcomes as they are (the step's total goes in the envelope)
    assert rows(raw(verify_budget=2))["d"] == ("drafted", None, 3, 3, 0, 2, 3)


def test_k_zero_reasons() -> None:
    assert rows(raw(truncated={"z": (3, 0, 0)}))["z"][:5] == ("k_zero", "grammar_truncated", 0, 0, 3)
    assert rows(raw(proposed=(["z"], [3]), decoding_without_drafts={"z": 511}))["z"][1] == "length_trim"
    assert rows(raw(proposed=(["z"], [3])))["z"][1] == "schedule"
    assert rows(raw(proposed=None))["z"][1] == "unknown"
    # Dynamic K: the previous step's schedule chose K = 0, so the drafter proposed nothing (sync) or the
    # scheduler left no placeholder (async): the reason is the schedule, not the drafter.
    assert rows(raw(step_k=0))["z"][1] == "schedule"
    assert rows(raw(step_k=0, proposed=None))["z"][1] == "schedule"
    # Async: every decoding request got placeholders, so only the max-length clamp or the budget cut them.
    assert rows(raw(asynchronous=True, proposed=None))["z"][1] == "schedule"
    assert rows(raw(asynchronous=True, proposed=None, decoding_without_drafts={"z": 510}))["z"][1] == "schedule"
    assert rows(raw(asynchronous=True, proposed=None, decoding_without_drafts={"z": 511}))["z"][1] == "length_trim"
    # vLLM 0.33 on: the previous step's SchedulerOutput.skip_drafts told the drafter to propose none;
    # it comes first, whatever the proposal list or the schedule say.
    assert rows(raw(drafts_skipped=True))["z"][1] == "skip_drafts"
    assert rows(raw(drafts_skipped=True, step_k=0, proposed=(["z"], [0])))["z"][1] == "skip_drafts"
    assert rows(raw(drafts_skipped=True, asynchronous=True, proposed=None))["z"][1] == "skip_drafts"
    assert rows(raw(drafts_skipped=True))["d"][1] is None  # drafts verified are not affected


def test_eos_inside_the_accepted_run_shows_in_emitted_not_accepted() -> None:
    assert rows(raw(sampled_before=[4, 1, 1], sampled_after=[2, 1, 1]))["d"][5:] == (3, 2)


def test_nothing_verified_means_no_outcome() -> None:
    assert rows(raw(sampled_before=[0, 1, 0])) == {}


def test_requests_vllm_did_not_process_have_no_outcome() -> None:
    """Async scheduling: "d" finished or was aborted while its step was in flight, so vLLM's
    update_from_output returned no output for it (and counted nothing)."""
    assert set(rows(raw(processed=["z", "p"]))) == {"z"}
    assert set(rows(raw(processed=[]))) == set()
