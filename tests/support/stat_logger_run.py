"""A vLLM API server's stat-logger path without a GPU, in a process of its own (vLLM loads its plugins
once per process): vLLM's plugin loaders, the real scheduler driven with constructed model-runner
outputs, and each step's ``SchedulerStats`` handed to vLLM's ``StatLoggerManager`` as ``AsyncLLM`` does.

``python -m tests.support.stat_logger_run --model DIR --out DIR`` runs two cases, each with a local
log of its own under ``--out``: the hook turned off (``SPECMETRICS_STEP_HOOK=false``, plugins loaded
by vLLM's ``load_general_plugins``), then a scheduler whose ``update_from_output`` has a signature the
hook does not know, as a later vLLM might (the plugin registered again). Per case it writes the totals
of vLLM's own counters, the steps that had them, and what the plugin reported, to ``<case>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from vllm.plugins import load_general_plugins
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.metrics.loggers import StatLoggerManager, load_stat_logger_plugin_factories
from vllm.v1.outputs import DraftTokenIds

from specmetrics.emitter import plugin
from specmetrics.emitter.vllm.patching import MARKER
from tests.support.schedulers import COUNTERS, K, add_counters, build, request, runner_output

CASES = ("step_hook_off", "step_hook_not_installed")


def change_the_scheduler() -> None:
    original = Scheduler.update_from_output

    def update_from_output(self: Any, output: Any, runner_output: Any) -> Any:
        return original(self, output, runner_output)

    Scheduler.update_from_output = update_from_output  # type: ignore[method-assign]


def run(model: Path, out: Path, case: str) -> None:
    os.environ["SPECMETRICS_SINK"] = (out / case / "log").as_uri()
    if case == "step_hook_off":
        os.environ["SPECMETRICS_STEP_HOOK"] = "false"
        load_general_plugins()  # vLLM's loader runs the plugin's register()
    else:
        os.environ.pop("SPECMETRICS_STEP_HOOK")
        change_the_scheduler()
        plugin._state = plugin._PluginState()
        plugin.register()
    sched = build(Scheduler, model)
    loggers = load_stat_logger_plugin_factories()
    manager = StatLoggerManager(sched.vllm_config, custom_stat_loggers=loggers, enable_default_loggers=False)
    for name in ("r0", "r1", "r2"):
        sched.add_request(request(name, max_tokens=12))
    totals: dict[str, int] = {}
    steps_with_stats = 0
    for step in range(12):
        scheduler_output = sched.schedule()
        ids, drafts = list(scheduler_output.num_scheduled_tokens), scheduler_output.scheduled_spec_decode_tokens
        accepted = {"r0": K, "r1": 1, "r2": 0}  # r0 accepts every draft, r1 one, r2 none
        outputs = sched.update_from_output(scheduler_output, runner_output(
            {r: [5] * (1 + min(accepted[r], len(drafts.get(r, ())))) for r in ids}))
        stats = outputs[0].scheduler_stats if outputs else None
        add_counters(totals, outputs)
        steps_with_stats += bool(stats is not None and stats.spec_decoding_stats is not None)
        for engine_index, core_outputs in outputs.items():  # AsyncLLM's output handler, step 4
            manager.record(engine_idx=engine_index, scheduler_stats=core_outputs.scheduler_stats,
                           iteration_stats=None)
        if ids and step % 4 != 3:  # every fourth step the drafter proposes nothing
            sched.update_draft_token_ids(DraftTokenIds(ids, [[5] * K for _ in ids]))
    plugin.flush()
    (out / f"{case}.json").write_text(json.dumps({
        "counters": {name: totals.get(name, 0) for name in COUNTERS},
        "steps_with_stats": steps_with_stats,
        "vllm_only": None if plugin.vllm_only() is None else plugin.vllm_only().value,
        "hook_wrapped": bool(getattr(Scheduler.__dict__["update_from_output"], MARKER, False)),
        "loggers": [f"{factory.__module__}.{factory.__qualname__}" for factory in loggers],
    }))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    for case in CASES:
        run(args.model, args.out, case)


if __name__ == "__main__":
    main()
