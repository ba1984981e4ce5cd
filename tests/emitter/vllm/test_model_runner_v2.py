"""Model Runner V2's CPU-side pieces (``vllm.v1.worker.gpu``) driven for real, feeding vLLM's real
schedulers with the plugin's hooks on them; the events must match vLLM's own counters.

What runs here (no GPU): ``DraftTokensHandler.set_draft_tokens``/``get_draft_tokens`` for batches
without structured output (the -1 lists V2 hands the sync scheduler), the scheduler's dynamic K
(``num_speculative_tokens_per_batch_size`` -> ``num_spec_tokens_to_schedule``, including 0),
``grammar_invalid_drafts`` (which drafts V2 verifies against a permissive grammar row) and
``_assign_draft_token_budget`` (adaptive verification's per-request draft admission), on real
``InputBatch`` objects built by ``InputBatch.make_dummy`` on the CPU. The schedulers take their
V2 branches: ``VllmConfig`` refuses V2 without Triton (``config/vllm.py:3190``), so each scheduler
gets the flag that its ``__init__`` reads from the config once (``scheduler.py:363``).

What cannot run without CUDA and is not faked here: ``DraftTokensHandler.__init__`` (creates a
CUDA stream and event; the handler is built without it, and the branch driven never uses
them), its structured-output copy, ``AsyncOutput`` (a CUDA event in ``__init__`` and
``get_output``), the speculators' ``propose`` (Triton kernels), ``expand_idx_mapping`` (Triton)
and ``AdaptiveVerificationManager`` (CUDA streams). ``scripts/gpu_check.sh`` runs them on a GPU.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.outputs import DraftTokenIds, ModelRunnerOutput
from vllm.v1.structured_output.utils import strip_speculative_padding
from vllm.v1.worker.gpu.input_batch import InputBatch, InputBuffers
from vllm.v1.worker.gpu.spec_decode.adaptive_verification import _assign_draft_token_budget
from vllm.v1.worker.gpu.spec_decode.utils import DraftTokensHandler
from vllm.v1.worker.gpu.structured_outputs import grammar_invalid_drafts

from tests.emitter.vllm.schedulers import K, add_counters, build, hook_plugin, request, views

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


def v2_drafts(so: SchedulerOutput) -> DraftTokenIds:
    """V2 ``sample_tokens`` -> ``take_draft_token_ids`` for a batch without structured output: the drafts
    (on the device) sliced to the step's K, of which the scheduler gets only the shape."""
    handler = DraftTokensHandler.__new__(DraftTokensHandler)  # __init__ only makes its CUDA stream and event
    ids = list(so.num_scheduled_tokens)
    drafts = torch.zeros(len(ids), K, dtype=torch.int64)[:, : so.num_spec_tokens_to_schedule]
    handler.set_draft_tokens(input_batch(ids), drafts)
    draft_token_ids = handler.get_draft_tokens()
    assert draft_token_ids is not None
    return draft_token_ids


def sampled_output(so: SchedulerOutput, accepted: dict[str, int]) -> ModelRunnerOutput:
    """What V2's ``AsyncOutput.get_output`` hands the scheduler: one bonus token plus the accepted drafts."""
    ids = list(so.num_scheduled_tokens)
    drafts = so.scheduled_spec_decode_tokens
    return ModelRunnerOutput(req_ids=ids, req_id_to_index={r: i for i, r in enumerate(ids)},
                             sampled_token_ids=[[5] * (1 + accepted.get(r, 0) if r in drafts else 1) for r in ids])


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
    sched.add_request(request("r0"))
    accepted = [{}, {"r0": 2}, {}, {}, {}, {"r0": 3}]
    totals: dict[str, int] = {}
    for step, acc in enumerate(accepted):
        if step == 1:
            sched.add_request(request("r1", max_tokens=3))  # two requests: K = 0 until r1 finishes
        so = sched.schedule()
        if step == 1:
            assert so.scheduled_spec_decode_tokens == {"r0": [-1] * K}  # V2's real drafts, as the scheduler sees them
        add_counters(totals, sched.update_from_output(so, sampled_output(so, acc)))
        sched.update_draft_token_ids(v2_drafts(so))
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


def test_v2_async_in_flight_placeholders_grammar_pads_and_dynamic_k_zero(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Production path: ``EngineCore.step_with_batch_queue`` order (step s+1 is scheduled before
    step s's output reaches ``Scheduler.update_from_output``) on ``AsyncScheduler`` with V2's
    branch of ``_update_after_schedule`` (``[-1] * num_spec_tokens_to_schedule`` placeholders,
    dynamic K 3 or 0), grammar pads as ``update_draft_token_ids_in_output`` leaves them
    (real drafts, then -1), ``Scheduler.get_grammar_bitmask``'s ``num_acceptable_drafts``
    (``strip_speculative_padding``) and V2's ``grammar_invalid_drafts`` on a real ``InputBatch``.

    The drafts V2 verifies against a permissive grammar row are exactly the -1 pads the events
    carry as ``k_invalid``; a K of 0 chosen by the schedule is ``k_zero`` with reason
    ``schedule`` (async has no proposal list, so it would otherwise be ``unknown``)."""
    log = hook_plugin(tmp_path, monkeypatch)
    sched = v2_scheduler(AsyncScheduler, model_cache)
    sched.add_request(request("r0"))
    # Per step: requests added before it is scheduled, accepted drafts, grammar pads (-1 tails).
    adds = {1: "r1"}
    accepted: list[dict[str, int]] = [{}, {"r0": 3}, {}, {}, {}, {"r0": 2}, {"r0": 1}, {"r0": 0}]
    pads = {6: {"r0": 2}, 7: {"r0": 3}}
    invalid_rows: dict[int, list[bool]] = {}
    totals: dict[str, int] = {}
    in_flight: list[tuple[int, SchedulerOutput]] = []
    for step in range(len(accepted)):
        if step in adds:
            sched.add_request(request(adds[step], max_tokens=3))
        so = sched.schedule()
        drafts = so.scheduled_spec_decode_tokens
        assert all(d == [-1] * K for d in drafts.values())  # async: placeholders only
        if step in pads:  # update_draft_token_ids_in_output: the valid prefix, then -1 per invalid draft
            for r, n in pads[step].items():
                drafts[r] = [7] * (K - n) + [-1] * n
            so.num_invalid_spec_tokens = pads[step]
            ids = list(so.num_scheduled_tokens)
            grammar_ids = list(pads[step])
            mask = grammar_invalid_drafts(
                input_batch(ids, [len(drafts.get(r, ())) for r in ids]), grammar_ids,
                [len(strip_speculative_padding(drafts[r])) for r in grammar_ids])
            assert mask is not None
            invalid_rows[step] = mask.tolist()  # r0's K + 1 logit rows: True where V2 rejects the draft
        in_flight.append((step, so))
        if len(in_flight) == 2:  # the batch queue is full: the older step's output comes back now
            done, done_so = in_flight.pop(0)
            add_counters(totals, sched.update_from_output(done_so, sampled_output(done_so, accepted[done])))
    for done, done_so in in_flight:
        add_counters(totals, sched.update_from_output(done_so, sampled_output(done_so, accepted[done])))
    assert invalid_rows == {6: [False, False, True, True], 7: [False, True, True, True]}
    vllm_view, rows = views(tmp_path, log)
    assert vllm_view == [totals]
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


def test_adaptive_verification_trims_on_the_device_and_the_vllm_view_still_matches(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Production path: ``AdaptiveVerificationManager.reallocate_drafts`` ->
    ``_assign_draft_token_budget`` (the uncompiled function; V2 runs it through ``torch.compile``)
    admitting fewer drafts than scheduled, then ``Scheduler.update_from_output`` counting them.

    The admitted counts stay on the device, so vLLM and the events both count the scheduled
    drafts: the vLLM-compatible view matches, and a request verified with no draft admitted is
    recorded as ``drafted`` with ``k_valid`` = 3 (the known gap, README "Supported versions")."""
    log = hook_plugin(tmp_path, monkeypatch)
    sched = build(Scheduler, model_cache / "tiny-llama-target")
    sched.use_v2_model_runner = True
    for r in ("r0", "r1"):
        sched.add_request(request(r))
    totals: dict[str, int] = {}
    so = sched.schedule()  # prefill
    add_counters(totals, sched.update_from_output(so, sampled_output(so, {})))
    sched.update_draft_token_ids(v2_drafts(so))
    so = sched.schedule()
    assert {r: len(d) for r, d in so.scheduled_spec_decode_tokens.items()} == {"r0": K, "r1": K}
    capacities = torch.tensor([K, K], dtype=torch.int32)  # enters as the scheduled drafts per request
    _assign_draft_token_budget(torch.tensor([[0.9] * K, [0.2] * K]), torch.tensor([0, 1]), capacities,
                               draft_budget=K, num_steps=K)
    admitted = dict(zip(["r0", "r1"], capacities.tolist(), strict=True))
    assert admitted == {"r0": 3, "r1": 0}  # r1's drafts were scheduled, none verified
    add_counters(totals, sched.update_from_output(so, sampled_output(so, {"r0": 2, "r1": admitted["r1"]})))
    vllm_view, rows = views(tmp_path, log)
    assert vllm_view == [totals] == [{"num_drafts": 2, "num_draft_tokens": 6, "num_accepted_tokens": 2}]
    assert [row[1:] for row in rows] == [("r0", "drafted", None, 3, 3, 0, 2), ("r1", "drafted", None, 3, 3, 0, 0)]
