"""The demo's scenarios on real vLLM (tiny local models), with vLLM's own counters per scenario.

Run in a process whose environment already holds ``SPECMETRICS_SINK`` (vLLM loads plugins
once per process). Each scenario runs ``LLM.generate`` and records its time window, the
counters vLLM reported for it (``LLM.get_metrics()`` after minus before) and the generated
token ids. ``python -m specmetrics.vllm_scenarios --out FILE`` writes them as JSON.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from specmetrics.tiny_models import corpus, tiny_models

K = 3
DRAFTER_MAX_LEN = 96
MAX_TOKENS = 24
COUNTERS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens")
JSON_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "value": {"type": "integer"}},
               "required": ["name", "value"]}


@dataclass
class ScenarioResult:
    """One scenario: its window, what vLLM reported for it, what it generated."""

    name: str
    engine: str
    started: float
    finished: float
    vllm: dict[str, Any]
    outputs: list[list[int]]


def engine_config(kind: str, models: dict[str, Path], async_scheduling: bool = False) -> dict[str, Any]:
    """LLM(...) arguments of the two engines: a same-weights drafter, and ngram."""
    common: dict[str, Any] = {"model": str(models["target"]), "max_model_len": 512, "dtype": "float32",
                              "enforce_eager": True, "disable_log_stats": False, "seed": 0,
                              "kv_cache_memory_bytes": 256 * 1024**2}  # not a share of RAM: NUMA nodes differ
    if kind == "draft_model":
        spec = {"method": "draft_model", "model": str(models["same_drafter"]), "num_speculative_tokens": K,
                "max_model_len": DRAFTER_MAX_LEN}
    else:  # vLLM refuses async scheduling with the CPU ngram proposer; ngram_gpu is the async one
        spec = {"method": "ngram_gpu" if async_scheduling else "ngram", "num_speculative_tokens": K,
                "prompt_lookup_max": 3, "prompt_lookup_min": 2}
    # Explicit either way: left unset, a GPU turns async scheduling on for draft_model by default.
    return {**common, "async_scheduling": async_scheduling, "speculative_config": spec}


def scenarios(kind: str, ids: list[int]) -> list[tuple[str, list[list[int]], bool]]:
    """(name, prompts as token ids, structured output?) of an engine's scenarios."""
    short = [ids[i * 10: i * 10 + 20] for i in range(4)]
    if kind == "ngram":
        return [("ngram", [ids[i * 7: i * 7 + 40] for i in range(4)], False)]
    return [
        ("fits", short, False),
        ("too_long", [ids[i * 10: i * 10 + 121] for i in range(4)], False),
        ("crossing", [*short, ids[300:380]], False),
        ("grammar", short, True),
    ]


def vllm_counters(llm: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"num_accepted_tokens_per_pos": [0] * K}
    for metric in llm.get_metrics():
        name = metric.name.removeprefix("vllm:spec_decode_")
        if name in COUNTERS:
            found[name] = int(metric.value)
        elif name == "num_accepted_tokens_per_pos":
            found[name] = [int(v) for v in metric.values]
    return {name: found.get(name, 0) for name in (*COUNTERS, "num_accepted_tokens_per_pos")}


def run_engine(kind: str, models: dict[str, Path], async_scheduling: bool = False) -> list[ScenarioResult]:
    from vllm import LLM, SamplingParams, TokensPrompt
    from vllm.sampling_params import StructuredOutputsParams

    llm = LLM(**engine_config(kind, models, async_scheduling))
    ids = llm.get_tokenizer().encode(" ".join(corpus(60)))
    results = []
    for name, prompts, structured in scenarios(kind, ids):
        params = SamplingParams(max_tokens=MAX_TOKENS, temperature=0, ignore_eos=not structured,
                                structured_outputs=StructuredOutputsParams(json=JSON_SCHEMA) if structured else None)
        before = vllm_counters(llm)
        started = time.time()
        outputs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
        finished = time.time()
        after = vllm_counters(llm)
        delta = {n: after[n] - before[n] for n in COUNTERS}
        delta["num_accepted_tokens_per_pos"] = [a - b for a, b in zip(after["num_accepted_tokens_per_pos"],
                                                                     before["num_accepted_tokens_per_pos"],
                                                                     strict=True)]
        results.append(ScenarioResult(name, kind, started, finished, delta,
                                      [list(o.outputs[0].token_ids) for o in outputs]))
    del llm
    gc.collect()
    return results


def run_all(engines: tuple[str, ...] = ("draft_model", "ngram"), cache: Path | None = None,
            async_scheduling: bool = False) -> list[ScenarioResult]:
    models = tiny_models(cache)
    results = [r for kind in engines for r in run_engine(kind, models, async_scheduling)]
    from emitter import plugin

    plugin.flush()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--engines", default="draft_model,ngram")
    parser.add_argument("--model-cache", type=Path, default=None)
    parser.add_argument("--async-scheduling", action="store_true", help="GPU only: vLLM's async scheduler.")
    args = parser.parse_args()
    results = run_all(tuple(args.engines.split(",")), args.model_cache, args.async_scheduling)
    args.out.write_text(json.dumps([asdict(r) for r in results]))
    os._exit(0)  # vLLM's background threads can hold up interpreter exit; everything is written


if __name__ == "__main__":
    main()
