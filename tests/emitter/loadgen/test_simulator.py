"""The load generator's stream: vLLM's batch-wide skip rule, the sync/async grammar forms,
determinism, and ground truth that matches what it wrote."""

from __future__ import annotations

import numpy as np
import pytest

from specmetrics.emitter.loadgen import LoadSpec
from specmetrics.emitter.loadgen.simulator import EngineSimulator
from specmetrics.schemas.codes import OUTCOME_DTYPE, KindCode
from specmetrics.schemas.wire import decode_step, step_event_from_wire
from tests.support.events import T0


def steps(spec: LoadSpec, count: int) -> list[bytes]:
    sim = EngineSimulator(spec, 0)
    return [sim.step() for _ in range(count)]


def test_skip_is_batch_wide_exactly_when_the_longest_sequence_plus_k_exceeds_the_drafter() -> None:
    spec = LoadSpec(batch_size=16, num_spec_tokens=3, drafter_max_len=600, prompt_len=(100, 450),
                    output_len=(50, 200), start_time=T0, seed=9)
    seen = set()
    lengths: dict[str, int] = {}
    for payload in steps(spec, 300):
        step = decode_step(payload)
        kinds = set(np.frombuffer(step.outcomes, dtype=OUTCOME_DTYPE)["kind"].tolist())
        skipped = step.batch_max_seq_len is not None and step.batch_max_seq_len + 3 > 600
        assert (kinds == {KindCode.SKIPPED_FOR_LENGTH}) is skipped
        # Each request's own length (schema 1.5): the batch's longest is the longest of them, and a
        # request's length grows by what it emitted at its previous step.
        event = step_event_from_wire(payload)
        assert step.batch_max_seq_len == max(o.seq_len or 0 for o in event.outcomes)
        for outcome in event.outcomes:
            assert outcome.seq_len is not None
            if outcome.request_id in lengths:
                assert outcome.seq_len == lengths[outcome.request_id]
            lengths[outcome.request_id] = outcome.seq_len + outcome.emitted
        if not skipped:
            assert KindCode.SKIPPED_FOR_LENGTH not in kinds
        seen.add(skipped)
    assert seen == {True, False}


@pytest.mark.parametrize("scheduling", ["sync", "async"])
def test_grammar_invalid_drafts_take_the_form_of_the_scheduling_mode(scheduling: str) -> None:
    spec = LoadSpec(grammar_invalid_rate=0.5, k_zero_rate=0.0, drafter_max_len=None, scheduling=scheduling,
                    start_time=T0, num_spec_tokens=2)
    outcomes = [o for p in steps(spec, 40) for o in step_event_from_wire(p).outcomes]
    grammar = [o for o in outcomes if o.kind == "grammar_invalid"]
    truncated = [o for o in outcomes if o.kind == "k_zero" and o.k_zero_reason == "grammar_truncated"]
    assert grammar
    if scheduling == "async":  # -1 pads stay scheduled
        assert all(o.k_sched == 2 for o in grammar) and not truncated
        assert any(o.k_valid == 0 for o in grammar)
    else:  # invalid drafts never reach the scheduler; all-invalid means nothing scheduled
        assert all(o.k_sched == o.k_valid > 0 for o in grammar) and truncated


def test_the_same_seed_gives_the_same_stream_and_another_seed_does_not() -> None:
    spec = LoadSpec(start_time=T0, seed=5)
    assert steps(spec, 20) == steps(spec, 20)
    assert steps(spec, 20) != steps(spec.model_copy(update={"seed": 6}), 20)


def test_two_generators_with_the_same_seed_and_other_prefixes_share_no_event_or_request_id() -> None:
    """Found by running a second load generator beside the demo's on Docker: ids that came from the
    seed alone made its rows collide with the first one's in (event_id, request_id)."""
    def ids(prefix: str) -> tuple[set[str], set[str]]:
        events = [step_event_from_wire(p) for p in steps(LoadSpec(start_time=T0, seed=0, engine_prefix=prefix), 30)]
        return {e.event_id for e in events}, {o.request_id for e in events for o in e.outcomes}

    (first_events, first_requests), (other_events, other_requests) = ids("demo"), ids("faults")
    assert len(first_events) == 30 and first_requests
    assert not first_events & other_events and not first_requests & other_requests
    assert ids("demo") == (first_events, first_requests)  # still a function of the spec


def test_ground_truth_counts_what_was_written() -> None:
    sim = EngineSimulator(LoadSpec(start_time=T0, seed=1, drafter_max_len=1600), 0)
    events = [step_event_from_wire(sim.step()) for _ in range(200)]
    outcomes = [o for e in events for o in e.outcomes]
    truth = sim.truth
    assert truth.rows == len(outcomes) == 200 * 64
    kinds = {k: sum(o.kind == k for o in outcomes) for k in truth.request_steps}
    assert kinds == truth.request_steps
    drafts = [o for o in outcomes if o.kind == "drafted" or (o.kind == "grammar_invalid" and o.k_valid > 0)]
    assert truth.num_drafts == len(drafts)
    assert truth.num_accepted_tokens == sum(o.accepted for o in drafts)
    assert truth.vllm_num_drafts == sum(getattr(o, "k_sched", getattr(o, "k_valid", 0)) > 0 for o in outcomes)
    assert truth.skipped_steps == sum(all(o.kind == "skipped_for_length" for o in e.outcomes) for e in events) > 0


def test_a_start_time_without_an_offset_is_utc() -> None:
    """``--start-time 2026-12-01T00:00:00`` (no offset) failed deep in the generator: naive minus aware."""
    naive = LoadSpec(start_time=T0.replace(tzinfo=None), seed=3)
    assert naive.start_time == T0
    assert steps(naive, 5) == steps(LoadSpec(start_time=T0, seed=3), 5)
