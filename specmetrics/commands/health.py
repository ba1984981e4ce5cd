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
    print(f"healthy: last heartbeat {age:.1f} s ago {_details(args.heartbeat_file)}".rstrip())
    return 0


def _details(path: Path) -> str:
    """The totals the heartbeat carries, as ``key=value`` pairs ('' when it holds none)."""
    try:
        content = json.loads(path.read_text())
    except (OSError, ValueError):
        return ""
    if not isinstance(content, dict):
        return ""
    return " ".join(f"{k}={v}" for k, v in content.items() if k not in ("time", "pid"))
