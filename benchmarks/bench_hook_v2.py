"""What the Model Runner V2 worker hooks add per step: ``reallocate_drafts`` + ``sample_tokens``.

Model Runner V2 needs a GPU (Triton, CUDA streams), so vLLM's V2 classes are used with their
two methods' bodies replaced by stand-ins that return at once; the plugin's wrappers
(``emitter.vllm.worker_v2``) then wrap those. The baseline, in the same run, is the two
stand-ins called directly: the difference is the wrappers' own work per step (reading the
budget, matching the batch, attaching it), which on a GPU
comes on top of a model step of milliseconds. One JSON line per batch size.

    python -m benchmarks.bench_hook_v2 [--calls 200000]
"""

from __future__ import annotations

import argparse
import json
import timeit
import types
from typing import Any

import torch
from vllm.v1.outputs import ModelRunnerOutput
from vllm.v1.worker.gpu.model_runner import GPUModelRunner
from vllm.v1.worker.gpu.spec_decode.adaptive_verification import AdaptiveVerificationManager

from benchmarks.args import positive_int
from specmetrics.emitter.vllm import worker_v2

OUTPUT = ModelRunnerOutput(req_ids=["r"], req_id_to_index={"r": 0}, sampled_token_ids=[[1]])


def sample_tokens(self: Any, grammar_output: Any) -> ModelRunnerOutput:
    return OUTPUT


def reallocate_drafts(self: Any, req_ids: list[str], idx_mapping: Any) -> None:
    self._batch_budget = None  # consumed, as vLLM's does


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=positive_int, default=200_000)
    args = parser.parse_args(argv)
    GPUModelRunner.sample_tokens = sample_tokens  # type: ignore[method-assign]
    AdaptiveVerificationManager.reallocate_drafts = reallocate_drafts  # type: ignore[method-assign,assignment]
    runner = GPUModelRunner.__new__(GPUModelRunner)
    manager = AdaptiveVerificationManager.__new__(AdaptiveVerificationManager)
    runner.adaptive_verification = manager
    cases = []
    for batch in (1, 64, 256):
        ids = [f"r{i}" for i in range(batch)]
        drafts = dict.fromkeys(ids, 3)
        idx_mapping = torch.arange(batch)
        state = types.SimpleNamespace(input_batch=types.SimpleNamespace(idx_mapping=idx_mapping))
        cases.append((batch, ids, drafts, idx_mapping, state))

    def timed(call_reallocate: Any, call_sample: Any, case: tuple[Any, ...]) -> float:
        _, ids, drafts, idx_mapping, state = case

        def step() -> None:
            manager._batch_budget = (drafts, drafts, len(ids))
            runner.execute_model_state = state
            call_reallocate(manager, ids, idx_mapping)
            call_sample(runner, None)

        return min(timeit.repeat(step, number=args.calls, repeat=5)) / args.calls * 1e6

    plain = [timed(reallocate_drafts, sample_tokens, case) for case in cases]
    assert worker_v2.install() == []
    hooked = [timed(AdaptiveVerificationManager.reallocate_drafts, GPUModelRunner.sample_tokens, case)
              for case in cases]
    assert getattr(OUTPUT, worker_v2.BUDGET_ATTR) == 256  # the hooks did their work
    for (batch, *_), base, with_hooks in zip(cases, plain, hooked, strict=True):
        print(json.dumps({"bench": "hook_v2", "batch": batch, "plain_us": round(base, 3),
                          "hooked_us": round(with_hooks, 3), "hook_us_per_step": round(with_hooks - base, 3)}))


if __name__ == "__main__":
    main()
