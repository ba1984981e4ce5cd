"""The engine thread publishes each step as a plain tuple in :class:`emitter.outcomes.RawStep`'s
field order, which the publisher's thread reads back with ``RawStep._make``.

Production path: the plugin's wrappers on vLLM's real ``Scheduler`` and ``AsyncScheduler`` (built
on CPU), driven step by step with constructed model-runner outputs; the publisher's queue is read
before its thread drains it. Every field is checked against the vLLM object or value it must come
from, and the checks are first shown to catch any two fields swapped.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations
from pathlib import Path
from time import time_ns
from typing import Any

import pytest
from transformers import AutoTokenizer
from vllm.sampling_params import SamplingParams, StructuredOutputsParams
from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.outputs import DraftTokenIds
from vllm.v1.request import Request
from vllm.v1.structured_output import StructuredOutputManager

from specmetrics.emitter import plugin
from specmetrics.emitter.outcomes import RawStep
from specmetrics.emitter.vllm.scheduler import TAG_ATTR
from specmetrics.emitter.vllm.worker import DECISION_ATTR
from specmetrics.emitter.vllm.worker_v2 import BUDGET_ATTR
from specmetrics.queries import connect, run_query
from tests.support.metrics import wait_for
from tests.support.schedulers import K, add_counters, build, hook_plugin, request, runner_output, views

Check = dict[str, Callable[[Any], bool]]
DROPPED_STEP = 3  # published while the queue (one step) is full: the next step says so


def run_steps(cls: type[Scheduler], model: Path) -> list[tuple[tuple[Any, ...], Check]]:
    """Five steps of two requests (r1 stops at its third token, inside a step's accepted drafts);
    per step published, the tuple and what each field must be."""
    sched = build(cls, model, per_request="detailed")
    sched.add_request(request("r0"))
    sched.add_request(request("r1", max_tokens=3))
    asynchronous = cls is AsyncScheduler
    queue = plugin.publisher()._queue
    published: list[tuple[tuple[Any, ...], Check]] = []
    queued: list[Check] = []
    decision = proposed = step_k = None
    skipped = False
    for step in range(5):
        scheduler_output = sched.schedule()
        ids, drafts = list(scheduler_output.num_scheduled_tokens), scheduler_output.scheduled_spec_decode_tokens
        if asynchronous:  # what update_draft_token_ids_in_output leaves on the output
            scheduler_output.num_invalid_spec_tokens = {r: 1 for r in drafts}
        model_runner_output = runner_output({r: [5] * (1 + len(drafts.get(r, ()))) for r in ids})
        setattr(model_runner_output, DECISION_ATTR, (step % 2 == 0, 40 + step, 96))
        setattr(model_runner_output, BUDGET_ATTR, 100 + step)
        before = list(map(len, model_runner_output.sampled_token_ids))
        start = time_ns() // 1000
        outputs = sched.update_from_output(scheduler_output, model_runner_output)
        end = time_ns() // 1000
        processed = [o.request_id for core_outputs in outputs.values() for o in core_outputs.outputs] \
            if asynchronous else None
        tag = getattr(scheduler_output, TAG_ATTR)
        check: Check = {
            "step_index": lambda v, tag=tag: v == tag[0],
            "event_time_us": lambda v, a=start, b=end: type(v) is int and a <= v <= b,
            "decision": lambda v, d=decision: v == d,
            "num_scheduled": lambda v, output=scheduler_output: v is output.num_scheduled_tokens,
            "scheduled_drafts": lambda v, output=scheduler_output: v is output.scheduled_spec_decode_tokens,
            "pads": lambda v, output=scheduler_output: v is output.num_invalid_spec_tokens,
            "req_ids": lambda v, output=model_runner_output: v is output.req_ids,
            "sampled_before": lambda v, b=before: v == b,
            "sampled_after": lambda v, a=[len(s) for s in model_runner_output.sampled_token_ids]: v == a,
            "decoding_without_drafts": lambda v, tag=tag: v is tag[1],
            "proposed": lambda v, p=proposed: v == p,
            "truncated": lambda v: v == {},
            "max_model_len": lambda v: v == 256,
            "num_sampled": lambda v: v == 1,
            "step_k": lambda v, k=step_k: v == k,
            "asynchronous": lambda v, a=asynchronous: v is a,
            "processed": lambda v, p=processed: v == p,
            "batch_decision": lambda v, d=getattr(model_runner_output, DECISION_ATTR): v == d,
            "after_drop": lambda v, s=step: v is (s == DROPPED_STEP + 1),
            "verify_budget": lambda v, s=step: v == 100 + s,
            "drafts_skipped": lambda v, s=skipped: v is s,
            "seq_lens": lambda v, tag=tag: v is tag[2],
            # vLLM's own counters, as update_from_output returned them (None: it counted no draft)
            "vllm_counts": lambda v, stats=outputs[0].scheduler_stats.spec_decoding_stats: v is stats,
            # vLLM's per-request metrics of the requests that finished (r1, at its third token)
            "vllm_finished": lambda v, finished=[(o.request_id, o.spec_decode_metrics) for o in outputs[0].outputs
                                                 if o.spec_decode_metrics is not None]: v == finished,
        }
        if step != DROPPED_STEP:
            queued.append(check)
        if step != DROPPED_STEP - 1:  # the publisher thread's turn; before the dropped step it waits
            published += [(queue.popleft(), queued.pop(0)) for _ in range(len(queue))]
        decision, step_k = getattr(model_runner_output, DECISION_ATTR), scheduler_output.num_spec_tokens_to_schedule
        skipped = getattr(scheduler_output, "skip_drafts", False)  # 0.33 on
        if not asynchronous:
            sched.update_draft_token_ids(DraftTokenIds(ids, [[5] * K for _ in ids]))
            proposed = (ids, [K] * len(ids))
    assert not queue and not queued
    return [(values[1], check) for values, check in published]


def failed_fields(values: tuple[Any, ...], check: Check) -> list[str]:
    raw = RawStep._make(values)
    return [name for name in RawStep._fields if not check[name](getattr(raw, name))]


@pytest.fixture
def steps(tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[tuple[Any, ...], Check]]:
    monkeypatch.setenv("SPECMETRICS_FLUSH_INTERVAL_MS", "600000")  # its thread never drains the queue here
    monkeypatch.setenv("SPECMETRICS_QUEUE_STEPS", "1")
    hook_plugin(tmp_path, monkeypatch)
    model = model_cache / "tiny-llama-target"
    try:
        return run_steps(Scheduler, model) + run_steps(AsyncScheduler, model)
    finally:
        plugin.flush()


def test_the_engine_thread_publishes_every_field_in_raw_step_order(
    steps: list[tuple[tuple[Any, ...], Check]],
) -> None:
    assert len(steps) == 8 and set(steps[0][1]) == set(RawStep._fields)
    assert all(len(values) == len(RawStep._fields) for values, _ in steps)
    assert [failed_fields(values, check) for values, check in steps] == [[]] * len(steps)
    assert [len(RawStep._make(values).vllm_finished or ()) for values, _ in steps].count(1) == 2  # r1, sync and async
    # The checks tell every field from every other: any two swapped fail some step's check.
    for i, j in combinations(range(len(RawStep._fields)), 2):
        swapped = [(tuple(v[j] if n == i else v[i] if n == j else x for n, x in enumerate(v)), check)
                   for v, check in steps]
        assert any(failed_fields(v, check) for v, check in swapped), (RawStep._fields[i], RawStep._fields[j])


def test_grammar_invalid_drafts_are_classified_as_the_release_verifies_them(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request constrained to ``(ab)+`` (xgrammar, the real ``StructuredOutputManager``) beside an
    unconstrained one, with drafts that break the grammar after one valid token, at the last one
    only, and at the first. Up to 0.33 vLLM cuts them before scheduling (``validate_tokens``); from
    0.34 (``trim_spec_tokens``) it schedules the first invalid one, counts it and the target rejects
    it: ``grammar_rejected``, whose valid drafts alone count in the corrected metrics. Either way the
    events give back vLLM's own counters."""
    log = hook_plugin(tmp_path, monkeypatch)
    sched = build(Scheduler, model_cache / "tiny-llama-target")
    params = SamplingParams(max_tokens=40, structured_outputs=StructuredOutputsParams(regex="(ab)+"))
    assert params.structured_outputs is not None
    params.structured_outputs._backend = "xgrammar"  # what the front end sets
    constrained = Request(request_id="g", prompt_token_ids=list(range(10, 18)), sampling_params=params,
                          pooling_params=None)
    sched.structured_output_manager.grammar_init(constrained)
    assert constrained.structured_output_request is not None
    wait_for(lambda: constrained.structured_output_request.grammar is not None)  # compiled on vLLM's thread
    sched.add_request(constrained)
    sched.add_request(request("r"))
    a, b = AutoTokenizer.from_pretrained(model_cache / "tiny-llama-target").convert_tokens_to_ids(["a", "b"])

    def target(drafts: list[int], text: list[int]) -> list[int]:
        """What the target samples for g: the drafts while they go on with "abab...", then that token."""
        sampled = []
        for draft in [*drafts, None]:
            expected = b if text[-1] == a else a
            sampled.append(expected)
            text.append(expected)
            if draft != expected:
                return sampled
        return sampled

    # g's proposals after each step: invalid from the second draft on, at the last one only, all
    # invalid, all valid. r accepts every draft.
    proposals = [[b, b, a], [b, a, a], [b, b, b], [b, a, b], []]
    totals: dict[str, int] = {}
    text = [b]  # the prompt's last token, as far as the grammar is concerned: g starts with "a"
    for proposal in proposals:
        scheduler_output = sched.schedule()
        drafts = scheduler_output.scheduled_spec_decode_tokens
        outputs = {"g": target(list(drafts.get("g", ())), text), "r": [5] * (1 + len(drafts.get("r", ())))}
        add_counters(totals, sched.update_from_output(scheduler_output, runner_output(outputs)))
        sched.update_draft_token_ids(DraftTokenIds(["g", "r"], [proposal, [5] * K]))
    vllm_view, rows = views(tmp_path, log)
    assert vllm_view == [totals]
    g = [row[2:] for row in rows if row[1] == "g"]
    if hasattr(StructuredOutputManager, "trim_spec_tokens"):  # 0.34 on
        assert g == [("grammar_rejected", None, 2, 1, 2, 1), ("grammar_rejected", None, 3, 2, 1, 2),
                     ("grammar_rejected", None, 1, 0, 3, 0), ("drafted", None, 3, 3, 0, 3)]
        assert totals == {"num_drafts": 8, "num_draft_tokens": 21, "num_accepted_tokens": 18}
    else:
        assert g == [("grammar_invalid", None, 1, 1, 2, 1), ("grammar_invalid", None, 2, 2, 1, 2),
                     ("k_zero", "grammar_truncated", 0, 0, 3, 0), ("drafted", None, 3, 3, 0, 3)]
        assert totals == {"num_drafts": 7, "num_draft_tokens": 18, "num_accepted_tokens": 18}
    assert [row[2:] for row in rows if row[1] == "r"] == [("drafted", None, 3, 3, 0, 3)] * 4
    corrected = connect(tmp_path / "data").execute(
        "SELECT num_drafts, num_draft_tokens, num_accepted_tokens FROM acceptance").fetchall()
    assert corrected == [(7, 18, 18)]  # the same on every release: only drafts that obey the grammar


def test_the_audit_shows_vllm_counting_differently(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release whose counting moved (here vLLM's own ``make_spec_decoding_stats`` counts one draft
    token less per draft from step 3 on, as if it left out a placeholder): the events'
    vLLM-compatible numbers no longer equal vLLM's, and the audit names the steps and the difference."""
    log = hook_plugin(tmp_path, monkeypatch)
    sched = build(Scheduler, model_cache / "tiny-llama-target")
    original = Scheduler.make_spec_decoding_stats

    def counting_more(self: Scheduler, *args: Any, **kwargs: Any) -> Any:
        if self.current_step >= 3:
            kwargs["num_draft_tokens"] -= 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Scheduler, "make_spec_decoding_stats", counting_more)
    sched.add_request(request("r0"))
    sched.add_request(request("r1"))
    for _ in range(5):
        scheduler_output = sched.schedule()
        ids, drafts = list(scheduler_output.num_scheduled_tokens), scheduler_output.scheduled_spec_decode_tokens
        sched.update_from_output(scheduler_output, runner_output({r: [5] * (1 + len(drafts.get(r, ()))) for r in ids}))
        sched.update_draft_token_ids(DraftTokenIds(ids, [[5] * K for _ in ids]))
    with pytest.raises(AssertionError):
        views(tmp_path, log)  # the helper's own audit check fails
    con = connect(tmp_path / "data")
    [audit] = con.execute("SELECT steps_compared, steps_differing, first_differing_step, last_differing_step, "
                          "num_drafts_difference, num_draft_tokens_difference, num_accepted_tokens_difference, "
                          "accepted_per_pos_difference FROM vllm_audit").fetchall()
    drafted = con.execute("SELECT list(DISTINCT step_index ORDER BY step_index) FROM request_steps "
                          "WHERE k_sched > 0").fetchone()
    assert drafted == ([2, 3, 4, 5],)  # the steps that verify drafts
    assert audit == (4, 3, 3, 5, 0, 2 * 3, 0, [0] * K)  # two drafts a step, one token less each


@pytest.mark.parametrize("level", ["summary", "detailed"])
def test_vllms_per_request_metrics_reach_the_reconciliation_equal_to_the_events(
    level: str, tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM's ``RequestSpecDecodeMetrics`` of each finished request (``--per-request-spec-decode-metrics``)
    beside the numbers the events give for it as vLLM counts them: equal, request by request."""
    log = hook_plugin(tmp_path, monkeypatch)
    sched = build(Scheduler, model_cache / "tiny-llama-target", per_request=level)
    accepted = {"r0": [3, 1, 0, 2, 3], "r1": [0, 2, 1, 3, 1]}
    for request_id in accepted:
        sched.add_request(request(request_id, max_tokens=12))
    for step in range(12):
        scheduler_output = sched.schedule()
        ids, drafts = list(scheduler_output.num_scheduled_tokens), scheduler_output.scheduled_spec_decode_tokens
        if not ids:
            break
        sampled = {r: [5] * (1 + min(len(drafts.get(r, ())), accepted[r][step % 5])) for r in ids}
        sched.update_from_output(scheduler_output, runner_output(sampled))
        sched.update_draft_token_ids(DraftTokenIds(ids, [[5] * K for _ in ids]))
    assert not sched.requests  # both finished
    views(tmp_path, log)
    con = connect(tmp_path / "data")
    rows = run_query(con, "SELECT request_id, vllm_reported_drafts, vllm_num_drafts, vllm_reported_draft_tokens, "
                          "vllm_num_draft_tokens, vllm_reported_accepted_tokens, vllm_num_accepted_tokens, "
                          "len(vllm_reported_accepted_per_step) AS per_step, differs FROM request_reconciliation "
                          "ORDER BY request_id").to_pylist()
    con.close()
    assert [row["request_id"] for row in rows] == ["r0", "r1"]
    for row in rows:
        assert row["vllm_reported_drafts"] == row["vllm_num_drafts"] > 0, row
        assert row["vllm_reported_draft_tokens"] == row["vllm_num_draft_tokens"], row
        assert row["vllm_reported_accepted_tokens"] == row["vllm_num_accepted_tokens"] > 0, row
        assert row["per_step"] == (row["vllm_num_drafts"] if level == "detailed" else 0) and row["differs"] is False
