"""``specmetrics schema``: print the event contract."""

from __future__ import annotations

import argparse
import json
from typing import Any

from specmetrics.schemas import REQUEST_STEP_SCHEMA, step_event_json_schema


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "schema", help="Print the event contract (JSON Schema, or the Arrow schema of the Parquet table)."
    )
    parser.add_argument("--format", choices=("json", "arrow"), default="json",
                        help="json: JSON Schema of a step event; arrow: the stored table (default: json).")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.format == "json":
        print(json.dumps(step_event_json_schema(), indent=2))
    else:
        print(REQUEST_STEP_SCHEMA.to_string(show_schema_metadata=False))
    return 0
