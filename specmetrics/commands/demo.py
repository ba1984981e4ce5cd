"""``specmetrics demo``: the main job on the embedded default, in one command.

Step events → local log → ingest → Parquet → DuckDB views, then vLLM-reported next to
corrected numbers. With vLLM installed the events come from real vLLM runs (tiny local
models, the plugin recording); without it, from the load generator, and the output says so.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from specmetrics.commands.ingest import ingest_source
from specmetrics.emitter.loadgen import LoadSpec, run_load
from specmetrics.emitter.sinks import LocalLogSink
from specmetrics.progress import Progress
from specmetrics.queries import connect, run_query
from specmetrics.tables import text_table
from specmetrics.windows import COLLATERAL_COLUMNS, ratios, reproduces, window_collateral, window_metrics

MARKER = ".specmetrics-demo"

#: (engine prefix, what it shows, spec fields): each scenario is one engine of the demo.
SCENARIOS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("fits", "a perfect drafter that fits: truth 100 %",
     {"acceptance": (1.0,), "drafter_max_len": 4096, "prompt_len": (32, 512), "output_len": (16, 256),
      "grammar_invalid_rate": 0.0, "k_zero_rate": 0.0}),
    ("too-long", "same drafter, prompts past its max length: vLLM says 0.00 %, truth: no drafts",
     {"acceptance": (1.0,), "drafter_max_len": 96, "prompt_len": (121, 121), "output_len": (16, 64),
      "grammar_invalid_rate": 0.0, "k_zero_rate": 0.0}),
    ("crossing", "same drafter, batches that cross the limit: vLLM mixes placeholders in",
     {"acceptance": (1.0,), "drafter_max_len": 1024, "prompt_len": (32, 900), "output_len": (16, 256),
      "grammar_invalid_rate": 0.0, "k_zero_rate": 0.0}),
    ("grammar", "structured output: drafts that break the grammar (async -1 pads)",
     {"acceptance": (0.8, 0.7, 0.6), "drafter_max_len": 4096, "prompt_len": (32, 512), "output_len": (16, 256),
      "grammar_invalid_rate": 0.3, "k_zero_rate": 0.0}),
    ("ngram", "ngram: mostly no proposal (K = 0)",
     {"method": "ngram", "acceptance": (0.6, 0.5, 0.4), "drafter_max_len": None, "prompt_len": (32, 512),
      "output_len": (16, 256), "grammar_invalid_rate": 0.0, "k_zero_rate": 0.7}),
)

#: The side-by-side table's columns after the engine (and scenario), and the shares table's.
SIDE_BY_SIDE_COLUMNS = ("vllm_drafts", "vllm_rate", "vllm_mal", "corrected_drafts", "corrected_rate", "corrected_mal")
SHARE_COLUMNS = ("skip_share", "k_zero_share", "grammar_invalid_share")
SIDE_BY_SIDE = """
SELECT v.engine_id,
       v.num_drafts AS vllm_drafts, v.acceptance_rate AS vllm_rate, v.mean_acceptance_length AS vllm_mal,
       c.num_drafts AS corrected_drafts, c.acceptance_rate AS corrected_rate,
       c.mean_acceptance_length AS corrected_mal,
       coalesce(s.skip_share, 0) AS skip_share, coalesce(s.k_zero_share, 0) AS k_zero_share,
       coalesce(s.grammar_invalid_share, 0) AS grammar_invalid_share
FROM acceptance_vllm v
JOIN acceptance c USING (engine_id, model, method, num_spec_tokens)
JOIN (SELECT engine_id, model, method, num_spec_tokens,
             sum(share) FILTER (WHERE is_skipped(kind)) AS skip_share,
             sum(share) FILTER (WHERE kind = 'k_zero') AS k_zero_share,
             sum(share) FILTER (WHERE kind = 'grammar_invalid') AS grammar_invalid_share
      FROM outcome_shares GROUP BY ALL) s USING (engine_id, model, method, num_spec_tokens)
ORDER BY v.engine_id
"""


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("demo", help="Run the whole pipeline on the embedded local log and show "
                                   "vLLM-reported vs corrected acceptance.")
    parser.add_argument("--workdir", type=Path, default=Path("specmetrics-demo"),
                        help="Where the demo's log and Parquet go (recreated each run; default ./specmetrics-demo).")
    parser.add_argument("--rows", type=int, default=50_000, help="Request-steps per scenario (default 50000).")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--loadgen", action="store_true", help="Use the load generator even if vLLM is installed.")
    parser.set_defaults(run=run)


WHAT_VLLM_SCENARIOS_SHOW = {
    "fits": "a drafter that computes the target's next token, and fits: truth 100 %",
    "too_long": "prompts past the drafter's max length: vLLM says 0.00 %, truth: no drafts",
    "crossing": "a request grows past the limit: from then on the whole batch skips drafting",
    "mixed": "one long request turns drafting off for the short ones until it is done",
    "grammar": "structured output (JSON schema): grammar-truncated drafts",
    "ngram": "ngram: no match, no proposal (K = 0)",
}


def run(args: argparse.Namespace) -> int:
    if args.loadgen or importlib.util.find_spec("vllm") is None:
        return run_loadgen(args)
    return run_vllm(args)


def run_vllm(args: argparse.Namespace) -> int:
    """The scenarios on real vLLM in a child process (vLLM reads the plugin's settings once)."""
    log_dir, data_dir = prepare_workdir(args.workdir)
    scenarios_file, vllm_log = args.workdir / "scenarios.json", args.workdir / "vllm.log"
    print(f"Running the scenarios on real vLLM with tiny local models (built on first use); vLLM's log: {vllm_log}")
    env = {**os.environ, "SPECMETRICS_SINK": log_dir.resolve().as_uri()}
    env.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    with vllm_log.open("w") as out:
        done = subprocess.run([sys.executable, "-m", "specmetrics.vllm_scenarios", "--out", str(scenarios_file)],
                              env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        print(f"specmetrics demo: error: vLLM failed (exit code {done.returncode}); see {vllm_log}", file=sys.stderr)
        return 2
    stats = ingest_source(log_dir.resolve().as_uri(), data_dir, once=True)
    print(f"\ningested {stats.rows:,} request-steps into {stats.files} Parquet file(s) under {data_dir}\n")
    con = connect(data_dir)
    rows, shares, collateral = [], [], []
    try:
        for scenario in json.loads(scenarios_file.read_text()):
            skips = window_collateral(con, scenario["started"], scenario["finished"])
            if skips["skips"]:
                collateral.append([scenario["engine"], scenario["name"], *skips.values()])
            got = window_metrics(con, scenario["started"], scenario["finished"], positions=3)
            vllm = scenario["vllm"]
            rows.append([
                scenario["engine"], scenario["name"], vllm["num_drafts"],
                *ratios(con, vllm["num_drafts"], vllm["num_draft_tokens"], vllm["num_accepted_tokens"]),
                got["num_drafts"], got["acceptance_rate"], got["mean_acceptance_length"],
                "yes" if reproduces(got, vllm) else "NO",
            ])
            shares.append([scenario["engine"], scenario["name"], got["skip_share"] or 0, got["k_zero_share"] or 0,
                           got["k_invalid"]])
    finally:
        con.close()
    print_scenarios({name: shows for name, shows in WHAT_VLLM_SCENARIOS_SHOW.items()
                     if any(row[1] == name for row in rows)})
    print("What vLLM reported (vllm_*, its own counters) vs what happened (corrected_*); mal: mean acceptance "
          "length;\nreproduced: the events give back vLLM's own counters exactly (the vLLM-compatible view):\n")
    print(text_table(["engine", "scenario", *SIDE_BY_SIDE_COLUMNS, "reproduced"], rows))
    print("\nWhy they differ: the shares of request-steps skipped for length and without a draft (K = 0), and the "
          "draft\ntokens that broke the grammar:\n")
    print(text_table(["engine", "scenario", "skip_share", "k_zero_share", "grammar_invalid_tokens"], shares))
    print_collateral(["engine", "scenario"], collateral)
    print(f"\nExplore: specmetrics sql --data {data_dir} \"SELECT * FROM outcome_shares\"")
    return 0


def run_loadgen(args: argparse.Namespace) -> int:
    log_dir, data_dir = prepare_workdir(args.workdir)
    reason = "--loadgen was given" if args.loadgen else "vLLM is not installed"
    print(f"{reason}: the events come from the load generator (synthetic, vLLM-shaped; it never pretends "
          "to be vLLM).\nInstall vllm (make test does) for the real thing.\n")
    start = datetime.now(UTC)
    progress = Progress("demo events", total=args.rows * len(SCENARIOS))
    written = 0
    with LocalLogSink(log_dir) as sink:
        for seed, (prefix, _, fields) in enumerate(SCENARIOS):
            spec = LoadSpec(rows=args.rows, engine_prefix=prefix, seed=args.seed + seed, start_time=start,
                            model="demo/tiny-llama", **fields)
            done = written
            truth = run_load(spec, sink, lambda rows, done=done: progress.update(done + rows))  # type: ignore[misc]
            written += sum(t.rows for t in truth.values())
    progress.finish()
    stats = ingest_source(log_dir.resolve().as_uri(), data_dir, once=True)
    print(f"\ningested {stats.rows:,} request-steps into {stats.files} Parquet file(s) under {data_dir}\n")
    con = connect(data_dir)
    try:
        table = run_query(con, SIDE_BY_SIDE)
        collateral = run_query(con, f"SELECT engine_id, {', '.join(COLLATERAL_COLUMNS)} FROM collateral_skips "
                                    "WHERE skips > 0").to_pylist()
    finally:
        con.close()
    order = {f"{prefix}-0/dp0": i for i, (prefix, _, _) in enumerate(SCENARIOS)}
    rows = sorted(table.to_pylist(), key=lambda row: order[str(row["engine_id"])])
    print_scenarios({f"{prefix}-0/dp0": shows for prefix, shows, _ in SCENARIOS})
    print("vLLM-reported (vllm_*) vs what happened (corrected_*); mal: mean acceptance length:\n")
    print(text_table(["engine_id", *SIDE_BY_SIDE_COLUMNS], [[r[name] for name in ("engine_id", *SIDE_BY_SIDE_COLUMNS)]
                                                           for r in rows]))
    print("\nWhy they differ: the shares of request-steps skipped for length, without a draft (K = 0), and with "
          "a draft\nthat broke the grammar:\n")
    print(text_table(["engine_id", *SHARE_COLUMNS], [[r[name] for name in ("engine_id", *SHARE_COLUMNS)]
                                                    for r in rows]))
    print_collateral(["engine"], [list(r.values()) for r in sorted(
        collateral, key=lambda r: order[str(r["engine_id"])])])
    print(f"\nExplore: specmetrics sql --data {data_dir} \"SELECT * FROM acceptance_per_position\"")
    return 0


def print_scenarios(shows: dict[str, str]) -> None:
    """What each scenario shows, one line each."""
    width = max(map(len, shows))
    print("Scenarios:\n" + "\n".join(f"  {name:<{width}}  {what}" for name, what in shows.items()) + "\n")


def print_collateral(keys: list[str], rows: list[list[Any]]) -> None:
    """Who paid for the long requests: the skips told apart by each request's own length."""
    print("\nSkips for length, by each request's own length: collateral_skips fit the drafter alone (a longer "
          "request\nin the batch turned drafting off); lost_draft_tokens, the drafts they lost; "
          "estimated_accepted_tokens, what\nthey would have accepted at their request's own rate:\n")
    print(text_table([*keys, *COLLATERAL_COLUMNS], rows))


def prepare_workdir(workdir: Path) -> tuple[Path, Path]:
    """Empty the demo's own folders (only in a folder the demo created) and return them."""
    if workdir.exists() and any(workdir.iterdir()) and not (workdir / MARKER).exists():
        raise ValueError(f"{workdir} exists and was not created by the demo; choose another --workdir")
    for sub in ("log", "data"):
        shutil.rmtree(workdir / sub, ignore_errors=True)
    for name in ("scenarios.json", "vllm.log"):
        (workdir / name).unlink(missing_ok=True)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / MARKER).touch()
    return workdir / "log", workdir / "data"
