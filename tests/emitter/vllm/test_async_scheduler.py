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
from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.outputs import ModelRunnerOutput

from emitter.vllm.worker import DECISION_ATTR
from tests.emitter.vllm.schedulers import K, add_counters, build, hook_plugin, request, views


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
        so = sched.schedule()
        if "pads" in step:  # what update_draft_token_ids_in_output leaves on the output
            so.num_invalid_spec_tokens = step["pads"]
        ids = list(so.num_scheduled_tokens)
        drafts = so.scheduled_spec_decode_tokens
        assert all(d == [-1] * K for d in drafts.values())  # async: placeholders only
        sampled = [[5] * (1 + step.get("accepted", {}).get(r, 0) if r in drafts else 1) for r in ids]
        mro = ModelRunnerOutput(req_ids=ids, req_id_to_index={r: i for i, r in enumerate(ids)},
                                sampled_token_ids=sampled)
        setattr(mro, DECISION_ATTR, (step.get("fits", True), 30, 96))
        add_counters(totals, sched.update_from_output(so, mro))
    vllm_view, rows = views(tmp_path, log)
    assert vllm_view == [totals]
    assert totals == {"num_drafts": 8, "num_draft_tokens": 22, "num_accepted_tokens": 8}
    assert [row[1:3] + row[4:] for row in rows] == [
        ("r0", "drafted", 3, 3, 0, 3), ("r1", "drafted", 3, 3, 0, 1),
        ("r0", "drafted", 3, 3, 0, 2), ("r1", "drafted", 3, 3, 0, 0),
        ("r0", "skipped_for_length", 3, 3, 0, 0), ("r1", "skipped_for_length", 3, 3, 0, 0),
        ("r0", "drafted", 3, 3, 0, 1), ("r1", "grammar_invalid", 3, 1, 2, 1),
    ]
