"""``specmetrics loadgen``: write a synthetic, vLLM-shaped step stream to a sink."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from typing import Any

from specmetrics.emitter.loadgen import EngineTruth, LoadSpec, run_load
from specmetrics.emitter.sinks import open_sink
from specmetrics.progress import Progress


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "loadgen", help="Write synthetic vLLM-shaped step events (for scale and tests; never pretends to be vLLM).",
    )
    parser.add_argument("--sink", required=True, help="Where to write: file:///tmp/specmetrics/log or kafka://host:9092/topic.")
    parser.add_argument("--rows", type=int, default=100_000, help="Request-steps to write (default 100000).")
    parser.add_argument("--engines", type=int, default=1, help="Engine instances (default 1).")
    parser.add_argument("--batch-size", type=int, default=64, help="Requests per step (default 64).")
    parser.add_argument("-k", "--num-spec-tokens", type=int, default=3, help="K (default 3).")
    parser.add_argument("--acceptance", default="0.8,0.7,0.6",
                        help="Per-position conditional acceptance, comma separated (default 0.8,0.7,0.6).")
    parser.add_argument("--prompt-len", default="32,1400", help="Prompt length range MIN,MAX (default 32,1400).")
    parser.add_argument("--output-len", default="16,768", help="Output length range MIN,MAX (default 16,768).")
    parser.add_argument("--drafter-max-len", type=int, default=2048,
                        help="Drafter max length; 0 never skips (default 2048).")
    parser.add_argument("--grammar-invalid-rate", type=float, default=0.02, help="Default 0.02.")
    parser.add_argument("--k-zero-rate", type=float, default=0.05, help="Default 0.05.")
    parser.add_argument("--scheduling", choices=("sync", "async"), default="async", help="Default async.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--engine-prefix", default="loadgen")
    parser.add_argument("--model", default="loadgen/tiny-target")
    parser.add_argument("--method", default="draft_model")
    parser.add_argument("--start-time", type=datetime.fromisoformat, default=None,
                        help="Event time of step 0, ISO 8601, UTC unless it has an offset (default: now).")
    parser.add_argument("--step-ms", type=float, default=25.0, help="Event-time spacing of steps (default 25).")
    parser.add_argument("--realtime", action="store_true",
                        help="Send each step when its event time comes, like a live engine (default: as fast as "
                             "the sink takes them).")
    parser.add_argument("--truth", default=None,
                        help="Write the exact ground-truth counters as JSON to this file ('-': stdout).")
    parser.set_defaults(run=run)


def spec_from_args(args: argparse.Namespace) -> LoadSpec:
    fields: dict[str, Any] = {
        "rows": args.rows, "engines": args.engines, "batch_size": args.batch_size,
        "num_spec_tokens": args.num_spec_tokens, "acceptance": _floats(args.acceptance),
        "prompt_len": _ints(args.prompt_len), "output_len": _ints(args.output_len),
        "drafter_max_len": args.drafter_max_len or None, "grammar_invalid_rate": args.grammar_invalid_rate,
        "k_zero_rate": args.k_zero_rate, "scheduling": args.scheduling, "seed": args.seed,
        "engine_prefix": args.engine_prefix, "model": args.model, "method": args.method, "step_ms": args.step_ms,
    }
    if args.start_time is not None:
        fields["start_time"] = args.start_time
    return LoadSpec(**fields)


def run(args: argparse.Namespace) -> int:
    spec = spec_from_args(args)
    progress = Progress("loadgen", total=spec.rows)
    with open_sink(args.sink, args.engine_prefix) as sink:
        truth = run_load(spec, sink, progress.update, realtime=args.realtime)
    progress.finish()
    spooled = sink.health().get("spool_pending", 0)
    if spooled:
        print(f"specmetrics loadgen: the broker did not take {spooled:,} message(s); they wait in the spool and are "
              f"sent by the next run with --engine-prefix {args.engine_prefix}", file=sys.stderr)
    if args.truth:
        text = json.dumps(truth_dict(truth), indent=2)
        if args.truth == "-":
            print(text)
        else:
            with open(args.truth, "w") as f:
                f.write(text + "\n")
    return 1 if spooled else 0


def truth_dict(truth: dict[str, EngineTruth]) -> dict[str, object]:
    return {engine: t.to_dict() for engine, t in truth.items()}


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        raise ValueError(f"expected comma-separated numbers, got {text!r}") from None


def _ints(text: str) -> tuple[int, int]:
    values = text.split(",")
    if len(values) != 2 or not all(v.strip().isdigit() for v in values):
        raise ValueError(f"expected MIN,MAX, got {text!r}")
    return int(values[0]), int(values[1])


