"""The plugin's cost on the engine thread, as a share of vLLM's own ``update_from_output``.

Real vLLM (CPU, tiny models, in-process engine core). Timing wrappers go *inside* and
*outside* the plugin's wrappers of ``Scheduler.update_from_output``,
``Scheduler.update_draft_token_ids`` and ``Scheduler.schedule``: hook cost = outer - inner (the
three summed), baseline = inner of ``update_from_output``, both per step, same steps, same run.
After a discarded warm-up run, batches of 1, 64 and 256 decoding requests with K = 3 and 5;
then K = 3, 256 requests with the sink stalled (a FIFO nobody reads): cost and RSS must stay
flat while steps are dropped; then K = 3 with the hook's own work removed (``--floor``: what
wrapping the methods costs at all); then K = 3 without the plugin (``--control``: outer - inner
is then the timing wrappers' own cost, which every other case includes and
``hook_net_vs_vllm`` of the last line takes out). One JSON line per case.

    SPECMETRICS_SINK is set by the benchmark itself.
    python -m benchmarks.bench_hook [--max-tokens 48]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.args import positive_int

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

TIMES: dict[str, list[float]] = {"inner": [], "outer": [], "draft_inner": [], "draft_outer": [], "sched_inner": [],
                                 "sched_outer": [], "rss": [], "engine_step": []}
WRAPPED = (("update_from_output", ""), ("update_draft_token_ids", "draft_"), ("schedule", "sched_"))


def timed(method: Callable[..., Any], key: str) -> Callable[..., Any]:
    @functools.wraps(method)  # the plugin checks the signature it wraps
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter_ns()
        try:
            return method(*args, **kwargs)
        finally:
            TIMES[key].append(time.perf_counter_ns() - start)
            if key == "outer":
                TIMES["rss"].append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)

    return wrapper


def install_timers(sink: str, queue_steps: int, plugin: bool = True) -> None:
    os.environ["SPECMETRICS_SINK"] = sink
    os.environ["SPECMETRICS_QUEUE_STEPS"] = str(queue_steps)
    # The publisher thread drains after the measured run: it never holds the GIL inside the
    # measured window, so outer - inner is the engine thread's own cost. Its work is timed apart.
    os.environ["SPECMETRICS_FLUSH_INTERVAL_MS"] = "600000"
    from vllm.plugins import load_general_plugins
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.engine.core import EngineCore

    EngineCore.step = timed(EngineCore.step, "engine_step")  # type: ignore[method-assign]

    for name, prefix in WRAPPED:
        setattr(Scheduler, name, timed(getattr(Scheduler, name), prefix + "inner"))
    if plugin:
        load_general_plugins()  # the plugin wraps the timed methods
    else:
        os.environ["VLLM_PLUGINS"] = "none"  # vLLM loads only the plugins named here: none
    for name, prefix in WRAPPED:
        setattr(Scheduler, name, timed(getattr(Scheduler, name), prefix + "outer"))


def measure(llm: Any, batch: int, max_tokens: int, ids: list[int]) -> dict[str, float]:
    from vllm import SamplingParams, TokensPrompt

    for values in TIMES.values():
        values.clear()
    prompts = [TokensPrompt(prompt_token_ids=ids[i % 200: i % 200 + 16]) for i in range(batch)]
    llm.generate(prompts, SamplingParams(max_tokens=max_tokens, temperature=0, ignore_eos=True), use_tqdm=False)
    steps = len(TIMES["inner"])
    inner = sum(TIMES["inner"])
    on_update = sum(TIMES["outer"]) - inner
    on_drafts = sum(TIMES["draft_outer"]) - sum(TIMES["draft_inner"])
    on_schedule = sum(TIMES["sched_outer"]) - sum(TIMES["sched_inner"])
    hook = on_update + on_drafts + on_schedule
    third = max(steps // 3, 1)
    return {"steps": steps, "vllm_update_us_per_step": inner / steps / 1e3, "hook_us_per_step": hook / steps / 1e3,
            "hook_update_us": on_update / steps / 1e3, "hook_drafts_us": on_drafts / steps / 1e3,
            "hook_schedule_us": on_schedule / steps / 1e3,
            "hook_vs_vllm": hook / inner,
            "engine_step_us": sum(TIMES["engine_step"]) / len(TIMES["engine_step"]) / 1e3,
            "hook_vs_engine_step": hook / sum(TIMES["engine_step"]),
            "hook_us_first_third": _hook_us(0, third), "hook_us_last_third": _hook_us(steps - third, steps),
            "max_rss_mb_first_third": TIMES["rss"][third - 1] / 1024, "max_rss_mb_end": TIMES["rss"][-1] / 1024}


def emit(k: int, batch: int, sink: str, result: dict[str, Any]) -> None:
    print(json.dumps({"bench": "hook", "k": k, "batch": batch, "sink": sink,
                      **{name: round(v, 4) if isinstance(v, float) else v for name, v in result.items()}}), flush=True)


def net_of_timers(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """Per batch size at K = 3: the hook's cost minus the timing wrappers' own (the control run),
    as a share of vLLM's update in the hook's run; the same for the last third of the steps."""
    runs = {(line["sink"], line["k"], line["batch"]): line for line in lines}
    net: dict[str, Any] = {"bench": "hook_net_of_timers", "k": 3}
    for batch in (1, 64, 256):
        hook, control = runs[("local_log", 3, batch)], runs[("control_no_plugin", 3, batch)]
        net[f"batch_{batch}"] = {
            "timers_us_per_step": control["hook_us_per_step"],
            "hook_net_us_per_step": round(hook["hook_us_per_step"] - control["hook_us_per_step"], 2),
            "hook_net_vs_vllm": round((hook["hook_us_per_step"] - control["hook_us_per_step"])
                                      / hook["vllm_update_us_per_step"], 4),
            "hook_net_us_last_third": round(hook["hook_us_last_third"] - control["hook_us_last_third"], 2),
        }
    return net


def _hook_us(a: int, b: int) -> float:
    return (sum(TIMES["outer"][a:b]) - sum(TIMES["inner"][a:b])) / max(b - a, 1) / 1e3


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-tokens", type=positive_int, default=320)
    parser.add_argument("--k", type=positive_int, default=None,
                        help="Run one K only (the benchmark runs itself per K).")
    parser.add_argument("--stalled", action="store_true")
    parser.add_argument("--floor", action="store_true",
                        help="Wrappers only: the hook's own work removed, to show the cost of wrapping at all.")
    parser.add_argument("--control", action="store_true",
                        help="No plugin: outer - inner is the cost of the timing wrappers themselves.")
    args = parser.parse_args(argv)
    if args.k is None:  # vLLM loads plugins once per process: one child per configuration
        import subprocess

        lines: list[dict[str, Any]] = []
        for k, flag in ((3, None), (5, None), (3, "--stalled"), (3, "--floor"), (3, "--control")):
            cmd = [sys.executable, "-m", "benchmarks.bench_hook", "--k", str(k), "--max-tokens", str(args.max_tokens)]
            out = subprocess.run(cmd + ([flag] if flag else []), check=True, stderr=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, text=True).stdout
            results = [line for line in out.splitlines() if line.startswith("{")]  # vLLM logs to stdout too
            print("\n".join(results), flush=True)
            lines += map(json.loads, results)
        print(json.dumps(net_of_timers(lines)))
        return
    if args.floor:
        from specmetrics.emitter.vllm.scheduler import EngineObserver

        kept: list[Any] = []  # the hook hands the proposed drafts on: freeing them is not wrapping's cost
        EngineObserver.tag = lambda *a: (0, {})  # type: ignore[method-assign]
        EngineObserver.before = lambda *a: None  # type: ignore[method-assign]
        EngineObserver.after = lambda obs, *a: kept.append(obs.proposed)  # type: ignore[method-assign]
    from specmetrics.tiny_models import corpus, tiny_models

    work = Path(tempfile.mkdtemp(prefix="bench-hook-"))
    log = work / "log"
    if args.stalled:
        log.mkdir()
        os.mkfifo(log / "00000000000000000000.log")
    install_timers(log.as_uri(), queue_steps=64 if args.stalled else 10_000, plugin=not args.control)
    from vllm import LLM

    models = tiny_models()
    llm = LLM(model=str(models["target"]), max_model_len=512, dtype="float32", enforce_eager=True, seed=0,
              kv_cache_memory_bytes=512 * 1024**2, max_num_seqs=256,
              speculative_config={"method": "draft_model", "model": str(models["same_drafter"]),
                                  "num_speculative_tokens": args.k, "max_model_len": 512})
    ids = llm.get_tokenizer().encode(" ".join(corpus(60)))
    from specmetrics.emitter import plugin
    from specmetrics.emitter.step_events import StepEvents
    from specmetrics.schemas.wire import encode_step

    measure(llm, 4, 64, ids)  # warm-up, discarded: the first steps after start-up run everything cold
    if not args.control:
        plugin.publisher()._queue.clear()
    for batch in ((256,) if args.stalled else (1, 64, 256)):
        result = measure(llm, batch, args.max_tokens, ids)
        if args.control:
            emit(args.k, batch, "control_no_plugin", result)
            continue
        queued = list(plugin.publisher()._queue)  # what the publisher thread will turn into events
        start = time.thread_time_ns()
        to_event = StepEvents()
        for item in queued:
            if (event := to_event(item)) is not None:
                encode_step(*event)
        result["publisher_thread_us_per_step"] = (time.thread_time_ns() - start) / max(len(queued), 1) / 1e3
        health = plugin.publisher().health
        result["published_steps"], result["dropped_steps"] = health.published_steps, health.dropped_queue_full
        if not args.stalled:
            plugin.publisher()._queue.clear()
        emit(args.k, batch, "stalled" if args.stalled else "wrappers_only_floor" if args.floor else "local_log", result)
    os._exit(0)


if __name__ == "__main__":
    main()
