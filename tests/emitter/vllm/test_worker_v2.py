"""Model Runner V2's CPU-side pieces (``vllm.v1.worker.gpu``) driven for real, feeding vLLM's real
schedulers with the plugin's hooks on them; the events must match vLLM's own counters.

What runs here (no GPU): ``DraftTokensHandler.set_draft_tokens``/``get_draft_tokens`` for batches
without structured output (the -1 lists V2 hands the sync scheduler), the scheduler's dynamic K
(``num_speculative_tokens_per_batch_size`` -> ``num_spec_tokens_to_schedule``, including 0),
``grammar_invalid_drafts`` (which drafts V2 verifies against a permissive grammar row) and
``AdaptiveVerificationManager.get_num_tokens`` and ``reallocate_drafts`` (adaptive verification's
budget from vLLM's cost model, and the per-request draft admission, ``torch.compile`` on the CPU),
on real ``InputBatch`` objects built by ``InputBatch.make_dummy`` on the CPU. The schedulers take their
V2 branches: ``VllmConfig`` refuses V2 without Triton (``config/vllm.py:3190``), so each scheduler
gets the flag that its ``__init__`` reads from the config once (``scheduler.py:363``).

What cannot run without CUDA: ``DraftTokensHandler.__init__`` (creates a CUDA stream and event;
the handler is built without it, and the branch driven never uses them), its structured-output
copy, ``AsyncOutput`` (a CUDA event in ``__init__`` and ``get_output``), the speculators'
``propose`` (Triton kernels), ``expand_idx_mapping`` (Triton), ``AdaptiveVerificationManager.__init__``
(CUDA streams; built without it, the cost tables it would profile given), ``RequestState`` (pinned
memory; a holder of the arrays the manager reads stands in) and the body of V2's ``sample_tokens``
(GPU sampling; the adaptive test stands in for it with the output it would return).
``scripts/gpu_check.sh`` runs V2 and async scheduling end to end on a GPU (not adaptive verification,
which needs a dspark model).
"""

from __future__ import annotations

import dataclasses
import logging
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.outputs import DraftTokenIds, ModelRunnerOutput
from vllm.v1.structured_output.utils import strip_speculative_padding
from vllm.v1.worker.gpu import structured_outputs
from vllm.v1.worker.gpu.input_batch import InputBatch, InputBuffers
from vllm.v1.worker.gpu.model_runner import ExecuteModelState
from vllm.v1.worker.gpu.model_runner import GPUModelRunner as V2ModelRunner
from vllm.v1.worker.gpu.spec_decode.adaptive_verification import AdaptiveVerificationManager
from vllm.v1.worker.gpu.spec_decode.utils import DraftTokensHandler

from specmetrics.emitter.vllm import worker_v2
from specmetrics.queries import connect, run_query
from tests.support.schedulers import K, add_counters, build, hook_plugin, request, runner_output, views

# Dynamic K: a lone request gets K = 3 drafts, a batch of two or more gets none.
DYNAMIC_K = [(1, 1, K), (2, 16, 0)]


def v2_scheduler(cls: type[Scheduler], model_cache: Path) -> Scheduler:
    """``cls`` with dynamic K, on its Model Runner V2 branches."""
    sched = build(cls, model_cache / "tiny-llama-target", num_speculative_tokens_per_batch_size=DYNAMIC_K)
    sched.use_v2_model_runner = True
    return sched


def input_batch(req_ids: list[str], num_draft_tokens_per_req: list[int] | None = None) -> InputBatch:
    """A real V2 ``InputBatch`` for ``req_ids`` (decode rows; with drafts where given) on the CPU."""
    n = len(req_ids)
    batch = InputBatch.make_dummy(n, n, InputBuffers(16, 64, torch.device("cpu")))
    if num_draft_tokens_per_req is None:
        return dataclasses.replace(batch, req_ids=req_ids)
    drafts = np.array(num_draft_tokens_per_req, dtype=np.int32)
    cu_num_logits = np.concatenate(([0], np.cumsum(drafts + 1))).astype(np.int32)
    # What expand_idx_mapping's Triton kernel computes: each logit row's position inside its request.
    local_pos = torch.cat([torch.arange(int(d) + 1, dtype=torch.int32) for d in drafts])
    return dataclasses.replace(batch, req_ids=req_ids, num_draft_tokens=int(drafts.sum()),
                               num_draft_tokens_per_req=drafts, cu_num_logits=torch.from_numpy(cu_num_logits),
                               cu_num_logits_np=cu_num_logits, expanded_local_pos=local_pos)


def draft_handler() -> DraftTokensHandler:
    """V2's handler of the drafts the scheduler gets, built without its ``__init__`` (which makes a CUDA
    stream and event) but with the state that sets: up to 0.33 it holds the last batch's drafts, from
    0.34 the latest drafts of every live request."""
    handler = DraftTokensHandler.__new__(DraftTokensHandler)
    handler.__dict__.update(_draft_tokens_by_req={}, _deferred_req_ids=None, _copy_pending=False)  # 0.34
    return handler


def v2_drafts(handler: DraftTokensHandler, scheduler_output: SchedulerOutput) -> DraftTokenIds:
    """V2 ``sample_tokens`` -> ``take_draft_token_ids`` for a batch without structured output: the drafts
    (on the device) sliced to the step's K, of which the scheduler gets only the shape."""
    ids = list(scheduler_output.num_scheduled_tokens)
    drafts = torch.zeros(len(ids), K, dtype=torch.int64)[:, : scheduler_output.num_spec_tokens_to_schedule]
    handler.set_draft_tokens(input_batch(ids), drafts)
    draft_token_ids = handler.get_draft_tokens()
    assert draft_token_ids is not None
    return draft_token_ids


def sampled_output(scheduler_output: SchedulerOutput, accepted: dict[str, int]) -> ModelRunnerOutput:
    """What V2's ``AsyncOutput.get_output`` hands the scheduler: one bonus token plus the accepted drafts."""
    ids = list(scheduler_output.num_scheduled_tokens)
    drafts = scheduler_output.scheduled_spec_decode_tokens
    return runner_output({r: [5] * (1 + accepted.get(r, 0) if r in drafts else 1) for r in ids})


def test_v2_sync_minus_one_drafts_are_drafted_and_dynamic_k_zero_is_schedule(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Production path: V2 ``GPUModelRunner.sample_tokens`` -> ``DraftTokensHandler.set_draft_tokens(
    input_batch, draft_tokens[:, :num_spec_tokens_to_schedule])`` -> ``take_draft_token_ids`` ->
    ``Scheduler.update_draft_token_ids`` (sync), with the scheduler's dynamic K
    (``Scheduler.schedule``: ``dynamic_sd_lookup``) choosing 3 or 0 per step.

    Without structured output V2 hands the scheduler ``[-1] * K`` for real drafts: they are drafted
    (not grammar pads). A K of 0 chosen by the schedule is ``k_zero`` with reason ``schedule``, not
    ``no_proposal``."""
    log = hook_plugin(tmp_path, monkeypatch)
    sched = v2_scheduler(Scheduler, model_cache)
    handler = draft_handler()
    sched.add_request(request("r0"))
    accepted = [{}, {"r0": 2}, {}, {}, {}, {"r0": 3}]
    totals: dict[str, int] = {}
    for step, acc in enumerate(accepted):
        if step == 1:
            sched.add_request(request("r1", max_tokens=3))  # two requests: K = 0 until r1 finishes
        scheduler_output = sched.schedule()
        if step == 1:
            # V2's real drafts, as the scheduler sees them
            assert scheduler_output.scheduled_spec_decode_tokens == {"r0": [-1] * K}
        add_counters(totals, sched.update_from_output(scheduler_output, sampled_output(scheduler_output, acc)))
        sched.update_draft_token_ids(v2_drafts(handler, scheduler_output))
    vllm_view, rows = views(tmp_path, log)
    assert vllm_view == [totals]
    assert totals == {"num_drafts": 2, "num_draft_tokens": 6, "num_accepted_tokens": 5}
    assert [row[1:] for row in rows] == [
        ("r0", "drafted", None, 3, 3, 0, 2),
        ("r0", "k_zero", "schedule", 0, 0, 0, 0), ("r1", "k_zero", "schedule", 0, 0, 0, 0),
        ("r0", "k_zero", "schedule", 0, 0, 0, 0), ("r1", "k_zero", "schedule", 0, 0, 0, 0),
        ("r0", "k_zero", "schedule", 0, 0, 0, 0),
        ("r0", "drafted", None, 3, 3, 0, 3),
    ]


@pytest.mark.parametrize("grammar", [False, True], ids=["placeholders", "grammar-pads"])
def test_v2_async_in_flight_placeholders_grammar_pads_and_dynamic_k_zero(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch, grammar: bool
) -> None:
    """Production path: ``EngineCore.step_with_batch_queue`` order (step s+1 is scheduled before
    step s's output reaches ``Scheduler.update_from_output``) on ``AsyncScheduler`` with V2's
    branch of ``_update_after_schedule`` (``[-1] * num_spec_tokens_to_schedule`` placeholders,
    dynamic K 3 or 0), grammar pads as ``update_draft_token_ids_in_output`` leaves them
    (real drafts, then -1), ``Scheduler.get_grammar_bitmask``'s ``num_acceptable_drafts``
    (``strip_speculative_padding``) and V2's ``grammar_invalid_drafts`` on a real ``InputBatch``.

    The drafts V2 verifies against a permissive grammar row are exactly the -1 pads the events
    carry as ``k_invalid``; a K of 0 chosen by the schedule is ``k_zero`` with reason
    ``schedule`` (async has no proposal list, so it would otherwise be ``unknown``). Without a
    grammar (``placeholders``, which runs on 0.34 too) the same steps verify real drafts."""
    log = hook_plugin(tmp_path, monkeypatch)
    sched = v2_scheduler(AsyncScheduler, model_cache)
    sched.add_request(request("r0"))
    # Per step: requests added before it is scheduled, accepted drafts, grammar pads (-1 tails).
    adds = {1: "r1"}
    accepted: list[dict[str, int]] = [{}, {"r0": 3}, {}, {}, {}, {"r0": 2}, {"r0": 1}, {"r0": 0}]
    pads = {6: {"r0": 2}, 7: {"r0": 3}} if grammar else {}
    invalid_rows: dict[int, list[bool]] = {}
    totals: dict[str, int] = {}
    in_flight: list[tuple[int, SchedulerOutput]] = []
    for step in range(len(accepted)):
        if step in adds:
            sched.add_request(request(adds[step], max_tokens=3))
        scheduler_output = sched.schedule()
        drafts = scheduler_output.scheduled_spec_decode_tokens
        assert all(d == [-1] * K for d in drafts.values())  # async: placeholders only
        if step in pads:  # update_draft_token_ids_in_output: the valid prefix, then -1 per invalid draft
            for r, n in pads[step].items():
                drafts[r] = [7] * (K - n) + [-1] * n
            scheduler_output.num_invalid_spec_tokens = pads[step]
            ids = list(scheduler_output.num_scheduled_tokens)
            grammar_ids = list(pads[step])
            mask = structured_outputs.grammar_invalid_drafts(  # up to 0.33 (tests/emitter/vllm/test_releases.py)
                input_batch(ids, [len(drafts.get(r, ())) for r in ids]), grammar_ids,
                [len(strip_speculative_padding(drafts[r])) for r in grammar_ids])
            assert mask is not None
            invalid_rows[step] = mask.tolist()  # r0's K + 1 logit rows: True where V2 rejects the draft
        in_flight.append((step, scheduler_output))
        if len(in_flight) == 2:  # the batch queue is full: the older step's output comes back now
            done, done_so = in_flight.pop(0)
            add_counters(totals, sched.update_from_output(done_so, sampled_output(done_so, accepted[done])))
    for done, done_so in in_flight:
        add_counters(totals, sched.update_from_output(done_so, sampled_output(done_so, accepted[done])))
    assert invalid_rows == ({6: [False, False, True, True], 7: [False, True, True, True]} if grammar else {})
    vllm_view, rows = views(tmp_path, log)
    assert vllm_view == [totals]
    if not grammar:
        assert totals == {"num_drafts": 4, "num_draft_tokens": 12, "num_accepted_tokens": 6}
        assert rows[-2:] == [(7, "r0", "drafted", None, 3, 3, 0, 1), (8, "r0", "drafted", None, 3, 3, 0, 0)]
        return
    # vLLM counts the all-invalid step 8 as a draft (of 0 tokens): the vLLM-compatible view does too.
    assert totals == {"num_drafts": 4, "num_draft_tokens": 7, "num_accepted_tokens": 6}
    assert rows == [  # step_index is the scheduler's (1-based): loop step + 1
        (2, "r0", "drafted", None, 3, 3, 0, 3),  # drafted while alone (K = 3), verified once r1 arrived
        (3, "r0", "k_zero", "schedule", 0, 0, 0, 0), (3, "r1", "k_zero", "schedule", 0, 0, 0, 0),
        (4, "r0", "k_zero", "schedule", 0, 0, 0, 0), (4, "r1", "k_zero", "schedule", 0, 0, 0, 0),
        (5, "r0", "k_zero", "schedule", 0, 0, 0, 0),  # r1 done: K = 3 again for the next drafts
        (6, "r0", "drafted", None, 3, 3, 0, 2),
        (7, "r0", "grammar_invalid", None, 3, 1, 2, 1),
        (8, "r0", "grammar_invalid", None, 3, 0, 3, 0),
    ]


def adaptive_verification(confidences: list[float]) -> AdaptiveVerificationManager:
    """A real manager on the CPU holding the state ``get_num_tokens`` and ``reallocate_drafts`` read:
    per-request draft confidences (as ``record_confidences`` leaves them, on the device and in its
    host copy) and its output buffers. Its ``__init__`` makes CUDA streams and events, and
    ``RequestState`` pinned host memory: the request state it reads (slots, computed tokens, prefill
    lengths) is a plain holder of those arrays. Cost tables are set per step (``cost_tables``)."""
    manager = AdaptiveVerificationManager.__new__(AdaptiveVerificationManager)
    n = len(confidences)
    manager.num_speculative_steps, manager.num_bonus_tokens, manager._max_total_logits = K, 1, 64
    manager.req_states = types.SimpleNamespace(  # type: ignore[assignment]
        req_id_to_index={f"r{i}": i for i in range(n)}, num_computed_tokens_np=np.full(n, 20, dtype=np.int32),
        prefill_len=types.SimpleNamespace(np=np.zeros(n, dtype=np.int32)))
    manager._stale_confidences = [types.SimpleNamespace(np=np.array([[c] * K for c in confidences]))]  # type: ignore[list-item]
    manager._stale_idx = 0
    manager._copy_admitted_drafts_to_host = False  # 0.33: only the engine's KV connector asks for the copy
    manager._confidence_probs = torch.tensor([[c] * K for c in confidences], dtype=torch.float32)
    manager._batch_draft_capacity = torch.empty(n, dtype=torch.int32)
    manager._num_non_draft_tokens = torch.empty(n, dtype=torch.int32)
    manager._cu_num_logits = torch.empty(n + 1, dtype=torch.int32)
    manager.query_start_loc = torch.zeros(n + 2, dtype=torch.int32)
    return manager


#: Per case, each step's draft budget (of 9 scheduled) and the drafts each request accepts. A partial
#: budget is admitted by a Triton kernel from 0.34 on (no CPU path): "none-then-all" runs everywhere.
BUDGETS = {
    "partial": ((4, {"r0": 2, "r2": 1}), (0, {}), (9, {"r0": 3, "r1": 0, "r2": 1})),
    "none-then-all": ((0, {}), (9, {"r0": 3, "r1": 0, "r2": 1})),
}
#: The survival-ranked admission per budget: r0's drafts first, then r2's first one.
ADMITTED = {4: [3, 0, 1], 0: [0, 0, 0], 9: [3, 3, 3]}


@pytest.mark.parametrize("case", list(BUDGETS))
def test_adaptive_verification_budget_reaches_the_events(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """Production path: V2 ``prepare_inputs`` -> ``AdaptiveVerificationManager.get_num_tokens``
    (vLLM's cost model picks the step's budget) -> ``reallocate_drafts`` (real, with
    ``_assign_draft_token_budget`` through ``torch.compile`` on the CPU) admitting a budget of 4,
    0, then all 9 of the scheduled drafts -> V2 ``sample_tokens`` -> the step's
    ``ModelRunnerOutput`` -> ``Scheduler.update_from_output`` (V2 branch), with the plugin's worker
    hooks (``emitter.vllm.worker_v2``) on the manager and on V2's ``sample_tokens``.

    Stand-in: the body of ``sample_tokens`` (GPU sampling) returns the output ``AsyncOutput.get_output``
    would, for the batch ``execute_model`` left in ``execute_model_state``.

    vLLM counts every scheduled draft; the events count them in the vLLM-compatible view too, but a
    step with budget 0 is ``k_zero``/``verify_budget`` (no draft verified) and a step with a partial
    budget carries its verified total, which gives the exact acceptance rate."""
    monkeypatch.setattr(AdaptiveVerificationManager, "reallocate_drafts", AdaptiveVerificationManager.reallocate_drafts)
    outputs: list[ModelRunnerOutput] = []

    def sample_tokens(self: V2ModelRunner, grammar_output: object) -> ModelRunnerOutput:
        self.execute_model_state = None
        return outputs.pop(0)

    monkeypatch.setattr(V2ModelRunner, "sample_tokens", sample_tokens)
    assert worker_v2.install() == []
    log = hook_plugin(tmp_path, monkeypatch)
    sched = build(Scheduler, model_cache / "tiny-llama-target")
    sched.use_v2_model_runner = True
    ids = ["r0", "r1", "r2"]
    for r in ids:
        sched.add_request(request(r))
    runner = V2ModelRunner.__new__(V2ModelRunner)
    runner.adaptive_verification = adaptive_verification([0.9, 0.2, 0.5])
    handler = draft_handler()
    # Cost tables (ms) that make vLLM's cost model choose a budget of 4, 0, then all 9 drafts: verifying
    # is free up to 3 non-draft tokens + 4, + 0, + 9 drafts, and costly beyond.
    def tables(free_drafts: int) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(8), np.where(np.arange(16) <= 3 + free_drafts, 1.0, 100.0)
    totals: dict[str, int] = {}
    scheduler_output = sched.schedule()  # prefill
    add_counters(totals, sched.update_from_output(scheduler_output, sampled_output(scheduler_output, {})))
    sched.update_draft_token_ids(v2_drafts(handler, scheduler_output))
    admitted: list[list[int]] = []
    steps = BUDGETS[case]
    for budget, accepted in steps:
        scheduler_output = sched.schedule()
        assert {r: len(d) for r, d in scheduler_output.scheduled_spec_decode_tokens.items()} == dict.fromkeys(ids, K)
        runner.adaptive_verification.cost_tables = tables(budget)
        manager = runner.adaptive_verification
        num_tokens = manager.get_num_tokens(scheduler_output.num_scheduled_tokens,
                                            scheduler_output.scheduled_spec_decode_tokens)
        assert num_tokens == 3 + budget  # one non-draft token per request, and the budget vLLM chose
        idx_mapping = torch.arange(3)
        runner.adaptive_verification.reallocate_drafts(ids, idx_mapping)
        admitted.append(runner.adaptive_verification._batch_draft_capacity.tolist())
        batch = dataclasses.replace(input_batch(ids), idx_mapping=idx_mapping)
        runner.execute_model_state = ExecuteModelState(batch, None, None, None, None, None, set(), None, None, K)
        outputs.append(sampled_output(scheduler_output, accepted))
        add_counters(totals, sched.update_from_output(scheduler_output, runner.sample_tokens(None)))
        sched.update_draft_token_ids(v2_drafts(handler, scheduler_output))
    assert admitted == [ADMITTED[budget] for budget, _ in steps]
    vllm_view, rows = views(tmp_path, log)
    assert vllm_view == [totals] == [{"num_drafts": 3 * len(steps), "num_draft_tokens": 9 * len(steps),
                                      "num_accepted_tokens": sum(sum(acc.values()) for _, acc in steps)}]
    assert rows == [  # budget 0: scheduled and counted by vLLM, none verified
        (step, r, *(("k_zero", "verify_budget", 3, 3, 0, 0) if budget == 0
                    else ("drafted", None, 3, 3, 0, acc.get(r, 0))))
        for step, (budget, acc) in enumerate(steps, start=2) for r in ids]
    con = connect(tmp_path / "data")
    verified = run_query(con, "SELECT step_index, any_value(drafts_verified) AS v FROM request_steps "
                              "GROUP BY step_index ORDER BY step_index").to_pylist()
    assert verified == [{"step_index": step, "v": 4 if budget == 4 else None}
                        for step, (budget, _) in enumerate(steps, start=2)]
    exact = run_query(con, "SELECT draft_tokens_scheduled, draft_tokens_verified, num_accepted_tokens, "
                           "acceptance_rate_verified FROM adaptive_verification").to_pylist()
    assert exact == ([{"draft_tokens_scheduled": 9, "draft_tokens_verified": 4, "num_accepted_tokens": 3,
                       "acceptance_rate_verified": 0.75}] if case == "partial" else [])
    drafting_steps = sum(budget > 0 for budget, _ in steps)
    corrected = run_query(con, "SELECT num_drafts, num_draft_tokens FROM acceptance").to_pylist()
    assert corrected == [{"num_drafts": 3 * drafting_steps, "num_draft_tokens": 9 * drafting_steps}]  # budget 0: none
    con.close()


def test_a_failing_v2_worker_hook_stops_and_the_output_passes_through(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The ``sample_tokens`` wrapper meets a batch it cannot read: it logs once, stops observing,
    and hands vLLM its output unchanged, then and at every later step."""
    output = runner_output({"r0": [5]})

    def sample_tokens(self: V2ModelRunner, grammar_output: object) -> ModelRunnerOutput:
        return output

    monkeypatch.setattr(V2ModelRunner, "sample_tokens", sample_tokens)
    assert worker_v2.install() == []
    runner = V2ModelRunner.__new__(V2ModelRunner)
    runner.adaptive_verification = adaptive_verification([0.5])
    runner.execute_model_state = "not a state"  # type: ignore[assignment]
    for _ in range(2):
        setattr(runner.adaptive_verification, "_specmetrics_last_budget", (None, 1))
        with caplog.at_level(logging.ERROR, logger="vllm.specmetrics"):
            assert runner.sample_tokens(None) is output
    assert not hasattr(output, worker_v2.BUDGET_ATTR)
    assert [r.getMessage().split(" failed")[0] for r in caplog.records] == [
        "specmetrics: observing adaptive verification's draft budget (Model Runner V2 worker)"]


def test_v2_worker_hooks_pass_on_parameters_a_later_vllm_adds(monkeypatch: pytest.MonkeyPatch) -> None:
    """``wrap`` checks only the leading parameters: a method that gains one must still get it
    through the wrappers (else every call would raise into vLLM)."""

    def reallocate_drafts(self: object, req_ids: list[str], idx_mapping: object, new: int = 0) -> int:
        return new

    monkeypatch.setattr(AdaptiveVerificationManager, "reallocate_drafts", reallocate_drafts)
    assert worker_v2.install() == []
    manager = adaptive_verification([0.5])
    assert manager.reallocate_drafts(["r0"], None, new=7) == 7  # type: ignore[call-arg]

