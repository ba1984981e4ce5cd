"""vLLM's real ``AsyncScheduler`` driven step by step on CPU, with the plugin's hooks on it.

Production path covered: ``AsyncScheduler._update_after_schedule`` (every decoding request's
drafts are -1 placeholders; the real drafts stay on the worker), ``Scheduler.update_from_output``
with ``num_invalid_spec_tokens`` (the -1 pads that ``update_draft_token_ids_in_output`` writes
for grammar-invalid drafts), and the worker's skip decision riding on ``ModelRunnerOutput``.
The model runner's outputs are constructed here (CPU cannot run async scheduling); on a GPU,
``scripts/gpu_check.sh`` runs it for real.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from vllm.sampling_params import SamplingParams
from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.outputs import DraftTokenIds, ModelRunnerOutput
from vllm.v1.request import Request, RequestStatus

from specmetrics.emitter.vllm.worker import DECISION_ATTR
from tests.support.schedulers import K, add_counters, build, hook_plugin, request, runner_output, views


def test_async_placeholders_pads_and_skips_are_classified_and_match_vllms_counters(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = hook_plugin(tmp_path, monkeypatch)
    sched = build(AsyncScheduler, model_cache / "tiny-llama-target")
    for i in range(2):
        sched.add_request(request(f"r{i}"))
    # Per decode step: accepted drafts per request, the worker's decision after it, -1 grammar pads.
    plan: list[dict[str, Any]] = [
        {},  # prefill
        {"accepted": {"r0": 3, "r1": 1}},
        {"accepted": {"r0": 2, "r1": 0}, "fits": False},  # the drafts verified next are placeholders
        {"accepted": {"r0": 0, "r1": 0}},  # skipped for length
        {"accepted": {"r0": 1, "r1": 1}, "pads": {"r1": 2}},  # r1: 2 of 3 drafts grammar-invalid
    ]
    totals: dict[str, int] = {}
    for step in plan:
        scheduler_output = sched.schedule()
        if "pads" in step:  # what update_draft_token_ids_in_output leaves on the output
            scheduler_output.num_invalid_spec_tokens = step["pads"]
        ids = list(scheduler_output.num_scheduled_tokens)
        drafts = scheduler_output.scheduled_spec_decode_tokens
        assert all(d == [-1] * K for d in drafts.values())  # async: placeholders only
        model_runner_output = runner_output(
            {r: [5] * (1 + step.get("accepted", {}).get(r, 0) if r in drafts else 1) for r in ids})
        setattr(model_runner_output, DECISION_ATTR, (step.get("fits", True), 30, 96))
        add_counters(totals, sched.update_from_output(scheduler_output, model_runner_output))
    vllm_view, rows = views(tmp_path, log)
    assert vllm_view == [totals]
    assert totals == {"num_drafts": 8, "num_draft_tokens": 22, "num_accepted_tokens": 8}
    assert [row[1:3] + row[4:] for row in rows] == [
        ("r0", "drafted", 3, 3, 0, 3), ("r1", "drafted", 3, 3, 0, 1),
        ("r0", "drafted", 3, 3, 0, 2), ("r1", "drafted", 3, 3, 0, 0),
        ("r0", "skipped_for_length", 3, 3, 0, 0), ("r1", "skipped_for_length", 3, 3, 0, 0),
        ("r0", "drafted", 3, 3, 0, 1), ("r1", "grammar_invalid", 3, 1, 2, 1),
    ]


def k_zero_rows(cls: type[Scheduler], tmp_path: Path, model: Path, monkeypatch: pytest.MonkeyPatch
                ) -> tuple[list[dict[str, int]], dict[str, int], list[tuple[Any, ...]]]:
    """Two requests run to ``max_model_len`` (256) under ``cls``: r0 accepts every draft, r1 none from
    step 50 on (one token per step: the max-length clamp trims its drafts to 0 at the end); step 6
    has a token budget of 1 + K + 1 (r1 gets one token, no draft slot). Sync: the drafter proposes
    K tokens after every step. Async: the batch queue order of ``step_with_batch_queue``."""
    log = hook_plugin(tmp_path, monkeypatch)
    sched = build(cls, model)
    for r in ("r0", "r1"):
        sched.add_request(request(r, max_tokens=400))

    def output(step: int, scheduler_output: SchedulerOutput) -> ModelRunnerOutput:
        ids, drafts = list(scheduler_output.num_scheduled_tokens), scheduler_output.scheduled_spec_decode_tokens
        accepted = {r: len(drafts.get(r, ())) if r == "r0" or step < 50 else 0 for r in ids}
        return runner_output({r: [5] * (1 + accepted[r]) for r in ids})

    totals: dict[str, int] = {}
    in_flight: list[tuple[int, SchedulerOutput]] = []
    while sched.requests:
        sched.max_num_scheduled_tokens = 1 + K + 1 if sched.current_step == 5 else 1024
        scheduler_output = sched.schedule()
        if cls is AsyncScheduler:
            in_flight.append((sched.current_step, scheduler_output))
            if len(in_flight) == 2:
                step, done = in_flight.pop(0)
                add_counters(totals, sched.update_from_output(done, output(step, done)))
        else:
            model_runner_output = output(sched.current_step, scheduler_output)
            add_counters(totals, sched.update_from_output(scheduler_output, model_runner_output))
            ids = list(sched.requests)
            sched.update_draft_token_ids(DraftTokenIds(ids, [[5] * K for _ in ids]))
    for step, done in in_flight:
        add_counters(totals, sched.update_from_output(done, output(step, done)))
    vllm_view, rows = views(tmp_path, log)
    return vllm_view, totals, rows


def test_async_k_zero_reasons_are_the_budget_and_the_length_clamp_as_in_sync(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Production path: ``Scheduler.schedule``'s token budget and max-length clamp
    (``scheduler.py:710-720``) cutting a decoding request to one token, under ``AsyncScheduler``
    (whose requests all hold -1 placeholders, so no proposal list tells the reason) and under the
    sync ``Scheduler`` with ``update_draft_token_ids``. Both give the same reasons, never
    ``unknown``; the async clamp bites one step earlier (its positions include the placeholders in
    flight), as vLLM's own counters show."""
    model = model_cache / "tiny-llama-target"
    sync_view, sync_totals, sync_rows = k_zero_rows(Scheduler, tmp_path / "sync", model, monkeypatch)
    async_view, async_totals, async_rows = k_zero_rows(AsyncScheduler, tmp_path / "async", model, monkeypatch)
    assert sync_view == [sync_totals] == [{"num_drafts": 166, "num_draft_tokens": 494, "num_accepted_tokens": 326}]
    assert async_view == [async_totals] == [{"num_drafts": 165, "num_draft_tokens": 488, "num_accepted_tokens": 326}]
    assert [row[:4] for row in sync_rows if row[2] == "k_zero"] == [
        (6, "r1", "k_zero", "schedule"), (107, "r1", "k_zero", "length_trim")]
    assert [row[:4] for row in async_rows if row[2] == "k_zero"] == [
        (6, "r1", "k_zero", "schedule"), (106, "r1", "k_zero", "length_trim"), (107, "r1", "k_zero", "length_trim")]
    assert [row[4] for row in async_rows if row[1] == "r1"][-8:] == [3, 3, 2, 2, 1, 1, 0, 0]  # k_sched


def test_requests_that_finish_or_abort_with_a_step_in_flight_count_as_vllm_counts_them(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Production path: ``EngineCore.step_with_batch_queue`` order on ``AsyncScheduler``: r1 stops
    on a stop token in the step whose output comes back while its next step is already scheduled,
    and r2 is aborted (``finish_requests``, the client went away) with two steps in flight.
    ``Scheduler.update_from_output`` skips both for the steps still in flight; so do the events."""
    log = hook_plugin(tmp_path, monkeypatch)
    sched = build(AsyncScheduler, model_cache / "tiny-llama-target")
    for r in ("r0", "r1", "r2"):
        sched.add_request(Request(request_id=r, prompt_token_ids=list(range(10, 18)), pooling_params=None,
                                  sampling_params=SamplingParams(max_tokens=40, stop_token_ids=[7])))

    def output(step: int, scheduler_output: SchedulerOutput) -> ModelRunnerOutput:
        ids, drafts = list(scheduler_output.num_scheduled_tokens), scheduler_output.scheduled_spec_decode_tokens
        last = {r: 7 if (r, step) == ("r1", 3) else 5 for r in ids}  # r1 samples its stop token at step 3
        return runner_output({r: [5] * len(drafts.get(r, ())) + [last[r]] for r in ids})

    totals: dict[str, int] = {}
    in_flight: list[tuple[int, SchedulerOutput]] = []
    for _ in range(7):
        in_flight.append((sched.current_step + 1, sched.schedule()))
        if sched.current_step == 5:
            sched.finish_requests("r2", RequestStatus.FINISHED_ABORTED)
        if len(in_flight) == 2:
            step, done = in_flight.pop(0)
            add_counters(totals, sched.update_from_output(done, output(step, done)))
    for step, done in in_flight:
        add_counters(totals, sched.update_from_output(done, output(step, done)))
    vllm_view, rows = views(tmp_path, log)
    assert vllm_view == [totals] == [{"num_drafts": 10, "num_draft_tokens": 30, "num_accepted_tokens": 30}]
    # Steps with an outcome: r1's step 4 and r2's steps 4 and 5 were in flight, and vLLM skipped them.
    assert {r: [row[0] for row in rows if row[1] == r] for r in ("r0", "r1", "r2")} == {
        "r0": [2, 3, 4, 5, 6, 7], "r1": [2, 3], "r2": [2, 3]}


@pytest.mark.parametrize("cls", [Scheduler, AsyncScheduler])
def test_steps_whose_drafts_the_scheduler_skips_leave_no_request_step_without_drafts(
    cls: type[Scheduler], tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From vLLM 0.33, on Model Runner V2 with a drafter of its own forward pass, the scheduler sets
    ``SchedulerOutput.skip_drafts`` when no scheduled request can use the drafts proposed after the
    step (each one samples its last token, or is a non-final prefill chunk), and the worker proposes
    none. Requests of 3, 4 and 6 tokens and a 60-token prompt of 6, every draft accepted; async as the
    engine runs it (step N + 1 scheduled before step N's output is processed). The skips are real on
    0.33 and 0.34, and none takes a draft from a request-step that is verified: every request-step is
    ``drafted``, none ``k_zero``, and the events give back vLLM's counters."""
    log = hook_plugin(tmp_path, monkeypatch)
    sched = build(cls, model_cache / "tiny-llama-target", model_cache / "tiny-llama-same-drafter")
    for name, max_tokens in (("a", 3), ("b", 4), ("c", 6)):
        sched.add_request(request(name, max_tokens=max_tokens))
    sched.add_request(Request(request_id="long", prompt_token_ids=list(range(10, 70)), pooling_params=None,
                              sampling_params=SamplingParams(max_tokens=6, ignore_eos=True)))
    asynchronous = cls is AsyncScheduler
    totals: dict[str, int] = {}
    skips = 0
    in_flight: list[SchedulerOutput] = []
    while sched.requests or in_flight:
        if sched.requests:
            in_flight.append(sched.schedule())
            skips += getattr(in_flight[-1], "skip_drafts", False)
        if asynchronous and len(in_flight) < 2 and sched.requests:
            continue  # the next step is scheduled before this one's output is processed
        output = in_flight.pop(0)
        drafts = output.scheduled_spec_decode_tokens
        ids = list(output.num_scheduled_tokens)
        add_counters(totals, sched.update_from_output(
            output, runner_output({r: [5] * (1 + len(drafts.get(r, ()))) for r in ids})))
        live = [r for r in ids if r in sched.requests]
        if not asynchronous and not getattr(output, "skip_drafts", False):  # the worker proposes none
            sched.update_draft_token_ids(DraftTokenIds(live, [[5] * K for _ in live]))
    vllm_view, rows = views(tmp_path, log)
    assert vllm_view == [totals]
    assert skips == (1 if getattr(sched, "can_skip_drafts", False) else 0)  # 0.32 has no such flag
    assert totals["num_drafts"] == len(rows) > 0
    assert {row[2] for row in rows} == {"drafted"}
