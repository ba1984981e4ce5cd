"""The skip-for-length decision follows each request's drafts, on vLLM's real sync ``Scheduler``.

Production path: the worker's ``_input_fits_in_drafter`` decision riding on ``ModelRunnerOutput``
(constructed here, as ``sample_tokens`` attaches it), ``Scheduler.update_draft_token_ids`` with the
zeros V1 writes when drafting is skipped, and ``Scheduler.schedule`` leaving a request out of a step
for want of token budget: that request verifies, at its next step, the drafts of the last step
that scheduled it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.outputs import DraftTokenIds

from specmetrics.emitter.vllm.worker import DECISION_ATTR
from tests.support.schedulers import K, add_counters, build, hook_plugin, request, runner_output, views


def test_a_request_the_budget_left_out_still_verifies_the_placeholders_it_holds(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = hook_plugin(tmp_path, monkeypatch)
    sched = build(Scheduler, model_cache / "tiny-llama-target")
    for r in ("r0", "r1"):
        sched.add_request(request(r))
    # Per step: the token budget, whether the drafter ran after it (for the requests it scheduled).
    plan = [(1024, True), (1024, False), (1 + K, True), (1024, True)]
    totals: dict[str, int] = {}
    for budget, fits in plan:
        sched.max_num_scheduled_tokens = budget
        scheduler_output = sched.schedule()
        ids, drafts = list(scheduler_output.num_scheduled_tokens), scheduler_output.scheduled_spec_decode_tokens
        real = {r: d != [0] * K for r, d in drafts.items()}  # the same-weights drafter's drafts are all accepted
        model_runner_output = runner_output({r: [5] * (1 + (K if real.get(r) else 0)) for r in ids})
        setattr(model_runner_output, DECISION_ATTR, (fits, 40, 96))
        add_counters(totals, sched.update_from_output(scheduler_output, model_runner_output))
        sched.update_draft_token_ids(DraftTokenIds(ids, [[5 if fits else 0] * K for _ in ids]))
    vllm_view, rows = views(tmp_path, log)
    assert vllm_view == [totals] == [{"num_drafts": 5, "num_draft_tokens": 15, "num_accepted_tokens": 9}]
    assert [row[:3] for row in rows] == [
        (2, "r0", "drafted"), (2, "r1", "drafted"),
        (3, "r0", "skipped_for_length"),  # r1 is left out: its placeholders wait
        (4, "r0", "drafted"), (4, "r1", "skipped_for_length"),  # the step before ran the drafter, not for r1
    ]


def test_v1_worker_hooks_pass_on_parameters_a_later_vllm_adds(monkeypatch: pytest.MonkeyPatch) -> None:
    """``wrap`` checks only the leading parameters: a method that gains one must still get it
    through the wrappers (else every call would raise into vLLM)."""
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner as V1ModelRunner  # up to 0.33

    from specmetrics.emitter.vllm import worker

    def fits(self: object, common_attn_metadata: object, new: int = 0) -> int:
        return new

    monkeypatch.setattr(V1ModelRunner, "_input_fits_in_drafter", fits)
    monkeypatch.setattr(V1ModelRunner, "sample_tokens", V1ModelRunner.sample_tokens)
    assert worker.install() == []
    runner = V1ModelRunner.__new__(V1ModelRunner)
    runner.effective_drafter_max_model_len = 96
    assert runner._input_fits_in_drafter(None, 5) == 5  # type: ignore[call-arg]
