"""Step events on the publisher's thread: the envelope, and the decision each request's drafts came with."""

from __future__ import annotations

from typing import Any

from vllm.v1.spec_decode.metrics import SpecDecodingStats

from specmetrics.emitter.step_events import StepEvents
from specmetrics.schemas.codes import KIND_CODES
from specmetrics.schemas.events import VllmCountsMissing
from tests.support.events import raw

FITS, SKIPS = (True, 80, 96), (False, 120, 96)  # as the worker sends them: plain tuples


def kinds(events: StepEvents, **changes: Any) -> dict[str, str] | None:
    event = events(({"boot": "b", "engine_instance": "e", "dp_rank": 0, "num_spec_tokens": 3}, tuple(raw(**changes))))
    if event is None:
        return None
    outcomes = event[1]
    return {r: KIND_CODES[k].value for r, k in zip(outcomes.request_id, outcomes.kind, strict=True)}


def test_nothing_verified_means_no_event() -> None:
    assert kinds(StepEvents(), sampled_before=[0, 0, 0]) is None


def test_event_envelope_carries_the_decision_that_produced_the_drafts() -> None:
    context = {"boot": "abc", "engine_instance": "e", "dp_rank": 1, "drafter_max_len": 96, "num_spec_tokens": 3}
    event = StepEvents()((context, tuple(raw(decision=(False, 130, 100)))))
    assert event is not None
    envelope, _ = event
    assert envelope == {"engine_instance": "e", "dp_rank": 1, "drafter_max_len": 100, "num_spec_tokens": 3,
                        "event_id": "abc-9", "step_index": 9, "event_time_us": 1_700_000_000_000_000,
                        "batch_max_seq_len": 130, "drafts_verified": None, "skip_check": "observed",
                        "vllm_counts": (0, 0, 0, (0, 0, 0)),  # vLLM counted no draft
                        "vllm_finished": None}  # vLLM keeps no per-request metrics


def test_vllm_counts_are_vllms_own_or_say_why_there_are_none() -> None:
    context = {"boot": "abc", "engine_instance": "e", "dp_rank": 1, "num_spec_tokens": 3}
    stats = SpecDecodingStats.new(3)
    stats.observe_draft(num_draft_tokens=3, num_accepted_tokens=2)
    stats.observe_draft(num_draft_tokens=2, num_accepted_tokens=0)
    for counts, expected in ((stats, (2, 5, 2, (1, 1, 0))), (None, (0, 0, 0, (0, 0, 0))),
                             ("stats_off", VllmCountsMissing.STATS_OFF),
                             ("not_returned", VllmCountsMissing.NOT_RETURNED)):
        event = StepEvents()((context, tuple(raw(vllm_counts=counts))))
        assert event is not None and event[0]["vllm_counts"] == expected


def test_skip_check_says_whether_a_skip_could_be_seen_for_every_request_verified() -> None:
    """Observed when the worker's decision about each request's drafts arrived; none under Model
    Runner V2 (which never skips for length); unobserved when a V1 runner sent no decision."""
    def check(context: dict[str, Any], events: StepEvents | None = None, **changes: Any) -> str:
        event = (events or StepEvents())(({"boot": "b", "engine_instance": "e", "dp_rank": 0, "num_spec_tokens": 3,
                                           **context},
                                          tuple(raw(**changes))))
        assert event is not None
        return str(event[0]["skip_check"])

    assert check({}, decision=(True, 40, 96)) == "observed"
    assert check({}, decision=None) == "unobserved"
    assert check({"runner_v2": True}, decision=None) == "none"
    assert check({"runner_v2": True}, decision=(True, 40, 96)) == "none"
    # d's drafts came with the decision of the step that scheduled it, though the last step sent none
    events = StepEvents()
    check({}, events, batch_decision=(True, 40, 96))
    assert check({}, events, decision=None, batch_decision=(True, 40, 96)) == "observed"
    assert check({}, events, decision=None, num_scheduled={"d": 4, "x": 4},
                 scheduled_drafts={"d": [5, 6, 7], "x": [5, 6, 7]}, req_ids=["d", "x"],
                 sampled_before=[3, 3], sampled_after=[3, 3],
                 seq_lens=[40, 40]) == "unobserved"  # x has no decision


def test_envelope_carries_the_verified_total_only_when_some_drafts_were_left_out() -> None:
    context = {"boot": "abc", "engine_instance": "e", "dp_rank": 0, "num_spec_tokens": 3}
    verified = {}
    for budget in (None, 0, 2, 3):  # of the 3 drafts scheduled
        event = StepEvents()((context, tuple(raw(verify_budget=budget))))
        assert event is not None
        verified[budget] = event[0]["drafts_verified"]
    assert verified == {None: None, 0: None, 2: 2, 3: None}


def step(scheduled: list[str], decision: tuple[bool, int, int], made: tuple[bool, int, int],
         after_drop: bool = False, lengths: list[int] | None = None) -> dict[str, Any]:
    """A step verifying 3 drafts of each request in ``scheduled`` (``lengths``: theirs once it ran)."""
    return {"seq_lens": lengths or [50] * len(scheduled),
            "num_scheduled": dict.fromkeys(scheduled, 4), "scheduled_drafts": {r: [0, 0, 0] for r in scheduled},
            "req_ids": list(scheduled), "sampled_before": [1] * len(scheduled),
            "sampled_after": [1] * len(scheduled), "decoding_without_drafts": {}, "decision": decision,
            "batch_decision": made, "after_drop": after_drop}


def test_a_request_left_out_of_a_step_verifies_the_drafts_of_the_last_step_that_scheduled_it() -> None:
    """x and y were drafted for after step 1 with the drafter skipped (placeholders). The token budget
    leaves y out of step 2, after which the drafter runs for x. At step 3 x verifies real drafts and
    y still the placeholders of step 1, though the previous step's decision says the drafter ran."""
    events = StepEvents()
    assert kinds(events, **step(["x", "y"], FITS, SKIPS)) == {"x": "drafted", "y": "drafted"}
    assert kinds(events, **step(["x"], SKIPS, FITS)) == {"x": "skipped_for_length"}
    assert kinds(events, **step(["x", "y"], FITS, FITS)) == {"x": "drafted", "y": "skipped_for_length"}


def seq_lens(events: StepEvents, **changes: Any) -> dict[str, int]:
    event = events(({"boot": "b", "engine_instance": "e", "dp_rank": 0, "num_spec_tokens": 3}, tuple(raw(**changes))))
    assert event is not None and event[1].seq_len is not None
    return dict(zip(event[1].request_id, event[1].seq_len, strict=True))


def test_an_outcome_s_length_is_the_request_s_own_where_its_drafts_were_decided() -> None:
    """The length each request had at the step after which the drafter-fit check decided about the
    drafts it verifies: y, left out of step 2, verifies at step 3 the drafts decided after step 1;
    a request first seen (or seen again after a dropped step) has none known (-1)."""
    events = StepEvents()
    assert seq_lens(events, **step(["x", "y"], FITS, SKIPS, lengths=[60, 90])) == {"x": -1, "y": -1}
    assert seq_lens(events, **step(["x"], SKIPS, FITS, lengths=[64])) == {"x": 60}
    assert seq_lens(events, **step(["x", "y"], FITS, FITS, lengths=[68, 94])) == {"x": 64, "y": 90}
    assert seq_lens(events, **step(["x", "y"], FITS, FITS, lengths=[72, 98], after_drop=True)) == {"x": -1, "y": -1}
    assert seq_lens(events, **step(["y"], FITS, FITS, lengths=[102])) == {"y": 98}


def test_after_a_dropped_step_the_previous_step_s_decision_applies() -> None:
    """x's skip was decided after step 1; step 2 (the drafter ran for x after it) was dropped from a
    full queue. At step 3 the remembered decision is stale: the engine's previous one applies."""
    events = StepEvents()
    kinds(events, **step(["x"], FITS, SKIPS))
    assert kinds(events, **step(["x"], FITS, FITS, after_drop=True)) == {"x": "drafted"}


def test_each_engine_keeps_its_own_requests_and_past_the_cap_only_the_current_step_s() -> None:
    events = StepEvents(max_requests=2)
    kinds(events, **step(["a", "b"], FITS, SKIPS))
    kinds(events, **step(["b"], FITS, SKIPS))
    assert kinds(events, **step(["a", "b"], FITS, FITS)) == {"a": "skipped_for_length", "b": "skipped_for_length"}
    kinds(events, **step(["a", "b"], FITS, SKIPS))
    kinds(events, **step(["c"], FITS, FITS))  # three requests held: a and b are forgotten
    assert kinds(events, **step(["a", "b"], FITS, FITS)) == {"a": "drafted", "b": "drafted"}
    other = ({"boot": "other", "engine_instance": "e2", "dp_rank": 0, "num_spec_tokens": 3},
             tuple(raw(**step(["b"], FITS, FITS))))
    event = events(other)
    assert event is not None and KIND_CODES[event[1].kind[0]].value == "drafted"
