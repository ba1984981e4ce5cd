"""vLLM's real schedulers built on CPU with the plugin's hooks, and the views their events give.

Shared by the tests that drive ``Scheduler``/``AsyncScheduler`` step by step with constructed
model-runner outputs (the parts of a step that need a GPU).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import torch
from vllm.config import CacheConfig, ModelConfig, ParallelConfig, SchedulerConfig, SpeculativeConfig, VllmConfig
from vllm.sampling_params import SamplingParams
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.engine import EngineCoreOutputs
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from vllm.v1.outputs import ModelRunnerOutput
from vllm.v1.request import Request
from vllm.v1.structured_output import StructuredOutputManager

from specmetrics.emitter import plugin
from specmetrics.emitter.settings import EmitterSettings
from specmetrics.emitter.vllm import scheduler as scheduler_hooks
from specmetrics.queries import connect, run_query
from tests.support.ingest import ingest_once

K = 3
DRAFTER_MAX_LEN = 96
COUNTERS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens")


def build(cls: type[Scheduler], model: Path, drafter: Path | None = None, per_request: str = "none",
          **speculative: Any) -> Scheduler:
    """``cls`` over the tiny model (max length 256), 200 KV blocks, K = 3: ngram (plus ``speculative``),
    or ``drafter`` as a draft model of max length :data:`DRAFTER_MAX_LEN`; ``per_request``: vLLM's
    ``--per-request-spec-decode-metrics``."""
    model_config = ModelConfig(model=str(model), dtype="float32", seed=0, max_model_len=256)
    scheduler_config = SchedulerConfig(max_num_seqs=16, max_num_batched_tokens=1024, max_model_len=256,
                                       is_encoder_decoder=False)
    cache_config = CacheConfig(block_size=16, cache_dtype="auto", enable_prefix_caching=False)
    parallel_config = ParallelConfig()
    if drafter is None:
        spec = SpeculativeConfig(method="ngram", num_speculative_tokens=K, prompt_lookup_max=3, prompt_lookup_min=2,
                                 **speculative)
    else:
        spec = SpeculativeConfig(method="draft_model", model=str(drafter), num_speculative_tokens=K,
                                 max_model_len=DRAFTER_MAX_LEN, target_model_config=model_config,
                                 target_parallel_config=parallel_config, **speculative)
    config = VllmConfig(model_config=model_config, scheduler_config=scheduler_config, cache_config=cache_config,
                        parallel_config=parallel_config, speculative_config=spec)
    config.observability_config.per_request_spec_decode_metrics = per_request  # type: ignore[assignment]
    cache_config.num_gpu_blocks = 200
    kv = KVCacheConfig(num_blocks=200, kv_cache_tensors=[], kv_cache_groups=[
        KVCacheGroupSpec(["layer"], FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=32,
                                                      dtype=torch.float32))])
    return cls(vllm_config=config, kv_cache_config=kv, block_size=16, log_stats=True,
               structured_output_manager=StructuredOutputManager(config))


def request(request_id: str, max_tokens: int = 40) -> Request:
    return Request(request_id=request_id, prompt_token_ids=list(range(10, 18)),
                   sampling_params=SamplingParams(max_tokens=max_tokens, ignore_eos=True), pooling_params=None)


def runner_output(sampled: dict[str, list[int]]) -> ModelRunnerOutput:
    """The worker's output of a step: the tokens ``sampled`` per request, in rows ordered unlike the
    scheduler's requests (reversed), as a runner orders its batch; with ``req_id_to_index`` where the
    running vLLM still has it (up to 0.33)."""
    ids = list(reversed(sampled))
    fields: dict[str, Any] = {"req_ids": ids, "sampled_token_ids": [sampled[r] for r in ids]}
    if "req_id_to_index" in {field.name for field in dataclasses.fields(ModelRunnerOutput)}:
        fields["req_id_to_index"] = {r: i for i, r in enumerate(ids)}
    return ModelRunnerOutput(**fields)


def hook_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Install the plugin's scheduler hooks with a local-log sink; the log folder."""
    log = tmp_path / "log"
    monkeypatch.setenv("SPECMETRICS_SINK", log.as_uri())
    monkeypatch.setattr(plugin, "_state", plugin._PluginState(settings=EmitterSettings()))
    assert scheduler_hooks.install(EmitterSettings(), plugin.publisher, plugin.flush) == []
    return log


def add_counters(totals: dict[str, int], outputs: dict[int, EngineCoreOutputs]) -> None:
    """Add the step's ``SpecDecodingStats`` (vLLM's own counters) to ``totals``."""
    stats = outputs[0].scheduler_stats.spec_decoding_stats if outputs and outputs[0].scheduler_stats else None
    if stats is not None:
        for name in COUNTERS:
            totals[name] = totals.get(name, 0) + getattr(stats, name)


def views(tmp_path: Path, log: Path) -> tuple[list[dict[str, Any]], list[tuple[Any, ...]]]:
    """Flush and ingest the events (checking the audit: vLLM's own counters in every step, equal to the
    events' vLLM-compatible ones); the vLLM-compatible view and the request-steps
    ``(step_index, request_id, kind, k_zero_reason, k_sched, k_valid, k_invalid, accepted)`` in step order."""
    plugin.flush()
    ingest_once(log, tmp_path / "data")
    con = connect(tmp_path / "data")
    vllm_view = run_query(con, f"SELECT {', '.join(COUNTERS)} FROM acceptance_vllm").to_pylist()
    # vLLM's own counters came with every step, and the events' vLLM-compatible numbers equal them step by step
    [(steps, compared, differing)] = con.execute(
        "SELECT (SELECT count(DISTINCT event_id) FROM request_steps), sum(steps_compared), sum(steps_differing) "
        "FROM vllm_audit").fetchall()
    assert compared == steps and differing == 0, run_query(
        con, "SELECT * FROM vllm_audit_steps WHERE differs").to_pylist()
    steps = run_query(con, "SELECT step_index, request_id, kind, k_zero_reason, k_sched, k_valid, k_invalid, "
                           "accepted FROM request_steps ORDER BY step_index, request_id").to_pylist()
    con.close()
    return vllm_view, [tuple(row.values()) for row in steps]
