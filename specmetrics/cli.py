"""``specmetrics``: one command, one subcommand per job."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

import duckdb

from specmetrics.commands import (
    create_topics,
    db,
    demo,
    health,
    ingest,
    loadgen,
    report,
    rollup,
    schema,
    serve,
    sql,
    table,
    verify,
)

COMMANDS = (demo, ingest, verify, rollup, sql, db, table, report, loadgen, schema, create_topics, health, serve)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specmetrics",
        description="The truth about speculative decoding in vLLM: step events -> log -> Parquet -> SQL.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="More log output (-vv: debug).")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(args.verbose, 2)]
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # kafka-python logs every failed connection attempt; the commands say in one line what failed.
    logging.getLogger("kafka").setLevel((logging.CRITICAL, logging.WARNING, logging.DEBUG)[min(args.verbose, 2)])
    try:
        result: int = args.run(args)
    except (ValueError, OSError, duckdb.Error) as exc:
        print(f"specmetrics {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return result


if __name__ == "__main__":
    sys.exit(main())
