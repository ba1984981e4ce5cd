"""``specmetrics health``: is a heartbeat file fresh? (The ingest container's healthcheck.)"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from specmetrics.heartbeat import heartbeat_age_s


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "health", help="Exit 0 if a heartbeat file (e.g. 'specmetrics ingest --heartbeat-file') was written within "
                       "--max-age-s seconds, 1 if it is older or missing.")
    parser.add_argument("--heartbeat-file", required=True, type=Path, help="The file the process rewrites.")
    parser.add_argument("--max-age-s", type=float, default=60.0, help="Oldest acceptable heartbeat (default 60).")
    parser.add_argument("--max-stalled-s", type=float, default=180.0,
                        help="Longest an ingester may have work it does not do: waiting for its consumer group to "
                             "hand out partitions, holding partitions with records behind and reading none, or "
                             "failing to reach its source (default 180).")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        age = heartbeat_age_s(args.heartbeat_file)
    except FileNotFoundError:
        print(f"unhealthy: no heartbeat file at {args.heartbeat_file} (not started yet, or started without "
              "--heartbeat-file)")
        return 1
    if age > args.max_age_s:
        print(f"unhealthy: last heartbeat {age:.1f} s ago (limit {args.max_age_s:g} s) in {args.heartbeat_file}")
        return 1
    details = _read(args.heartbeat_file)
    stalled = details.get("stalled_s", 0)
    if isinstance(stalled, int | float) and stalled > args.max_stalled_s:
        print(f"unhealthy: stalled for {stalled:.0f} s (limit {args.max_stalled_s:g} s): it has work it does not do "
              f"(its consumer group hands out no partitions, or records wait behind it) in {args.heartbeat_file}")
        return 1
    print(f"healthy: last heartbeat {age:.1f} s ago {_details(details)}".rstrip())
    return 0


def _read(path: Path) -> dict[str, Any]:
    """What the heartbeat file carries (empty when it is not a JSON object)."""
    try:
        content = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return content if isinstance(content, dict) else {}


def _details(content: dict[str, Any]) -> str:
    """The totals the heartbeat carries, as ``key=value`` pairs ('' when it holds none)."""
    return " ".join(f"{k}={v}" for k, v in content.items() if k not in ("time", "pid"))
