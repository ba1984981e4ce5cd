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
import torch
from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, SpeculativeConfig, VllmConfig
from vllm.sampling_params import SamplingParams
from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from vllm.v1.outputs import ModelRunnerOutput
from vllm.v1.request import Request
from vllm.v1.structured_output import StructuredOutputManager

from emitter import plugin
from emitter.settings import EmitterSettings
from emitter.vllm import scheduler as scheduler_hooks
from emitter.vllm.worker import DECISION_ATTR
from queries import connect, run_query
from tests.ingest.conftest import ingest_once

K = 3


def async_scheduler(model: Path) -> AsyncScheduler:
    model_config = ModelConfig(model=str(model), dtype="float32", seed=0, max_model_len=256)
    scheduler_config = SchedulerConfig(max_num_seqs=16, max_num_batched_tokens=1024, max_model_len=256,
                                       is_encoder_decoder=False)
    cache_config = CacheConfig(block_size=16, cache_dtype="auto", enable_prefix_caching=False)
    spec = SpeculativeConfig(method="ngram", num_speculative_tokens=K, prompt_lookup_max=3, prompt_lookup_min=2)
    config = VllmConfig(model_config=model_config, scheduler_config=scheduler_config, cache_config=cache_config,
                        speculative_config=spec)
    cache_config.num_gpu_blocks = 200
    kv = KVCacheConfig(num_blocks=200, kv_cache_tensors=[], kv_cache_groups=[
        KVCacheGroupSpec(["layer"], FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=32,
                                                      dtype=torch.float32))])
    return AsyncScheduler(vllm_config=config, kv_cache_config=kv, block_size=16, log_stats=True,
                          structured_output_manager=StructuredOutputManager(config))


def test_async_placeholders_pads_and_skips_are_classified_and_match_vllms_counters(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "log"
    monkeypatch.setenv("SPECMETRICS_SINK", log.as_uri())
    monkeypatch.setattr(plugin, "_state", plugin._PluginState(settings=EmitterSettings()))
    assert scheduler_hooks.install(EmitterSettings(), plugin.publisher, plugin.flush) == []
    sched = async_scheduler(model_cache / "tiny-llama-target")
    for i in range(2):
        sched.add_request(Request(request_id=f"r{i}", prompt_token_ids=list(range(10, 18)),
                                  sampling_params=SamplingParams(max_tokens=40, ignore_eos=True), pooling_params=None))
    # Per decode step: accepted drafts per request, the worker's decision after it, -1 grammar pads.
    plan: list[dict[str, Any]] = [
        {},  # prefill
        {"accepted": {"r0": 3, "r1": 1}},
        {"accepted": {"r0": 2, "r1": 0}, "fits": False},  # the drafts verified next are placeholders
        {"accepted": {"r0": 0, "r1": 0}},  # skipped for length
        {"accepted": {"r0": 1, "r1": 1}, "pads": {"r1": 2}},  # r1: 2 of 3 drafts grammar-invalid
    ]
    totals = {"num_drafts": 0, "num_draft_tokens": 0, "num_accepted_tokens": 0}
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
        outputs = sched.update_from_output(so, mro)
        stats = outputs[0].scheduler_stats.spec_decoding_stats if outputs and outputs[0].scheduler_stats else None
        if stats is not None:
            for name in totals:
                totals[name] += getattr(stats, name)
    plugin.flush()
    ingest_once(log, tmp_path / "data")
    con = connect(tmp_path / "data")
    vllm_view = run_query(con, "SELECT num_drafts, num_draft_tokens, num_accepted_tokens FROM acceptance_vllm")
    kinds = run_query(con, "SELECT step_index, request_id, kind, k_sched, k_valid, k_invalid, accepted "
                           "FROM request_steps ORDER BY step_index, request_id").to_pylist()
    con.close()
    assert vllm_view.to_pylist() == [totals]
    assert totals == {"num_drafts": 8, "num_draft_tokens": 22, "num_accepted_tokens": 8}
    rows = [(r["request_id"], r["kind"], r["k_sched"], r["k_valid"], r["k_invalid"], r["accepted"]) for r in kinds]
    assert rows == [
        ("r0", "drafted", 3, 3, 0, 3), ("r1", "drafted", 3, 3, 0, 1),
        ("r0", "drafted", 3, 3, 0, 2), ("r1", "drafted", 3, 3, 0, 0),
        ("r0", "skipped_for_length", 3, 3, 0, 0), ("r1", "skipped_for_length", 3, 3, 0, 0),
        ("r0", "drafted", 3, 3, 0, 1), ("r1", "grammar_invalid", 3, 1, 2, 1),
    ]
    assert [r["step_index"] for r in kinds] == sorted(r["step_index"] for r in kinds)
