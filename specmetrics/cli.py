"""``specmetrics``: one command, one subcommand per job."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import duckdb
import pyarrow as pa

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
from specmetrics.storage.damage import StoreDamaged
from specmetrics.storage.location import S3Location, is_s3
from specmetrics.storage.table import Table, is_table

#: The errors of a read that a damaged data file causes: pyarrow's, and DuckDB's that are not about
#: the query itself (DuckDB names a broken footer with a bare duckdb.Error).
_READ_ERRORS = (duckdb.Error, duckdb.IOException, duckdb.InvalidInputException, duckdb.InternalException)

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
    except StoreDamaged as exc:
        print(f"specmetrics {args.command}: error: {exc}", file=sys.stderr)
        return StoreDamaged.exit_code
    except (ValueError, OSError, duckdb.Error) as exc:
        damage = _damage(args) if _read_error(exc) else None
        print(f"specmetrics {args.command}: error: {damage or exc}", file=sys.stderr)
        return StoreDamaged.exit_code if damage else 2
    except KeyboardInterrupt:
        return 130
    return result


def _read_error(exc: BaseException) -> bool:
    """Whether ``exc`` may come from reading a damaged file: DuckDB's read errors, pyarrow's (an OSError
    without an errno, as "Couldn't deserialize thrift"), not a system call's or a connection's."""
    if isinstance(exc, pa.ArrowException) or type(exc) in _READ_ERRORS:
        return True
    return type(exc) is OSError and exc.errno is None


def _damage(args: argparse.Namespace) -> str | None:
    """The damaged file of the table a command read (``--data``) or wrote (``--out``) that made it
    fail, named, if one is: DuckDB and pyarrow name none."""
    data = getattr(args, "data", None) or getattr(args, "out", None)
    if not isinstance(data, str | Path):
        return None
    try:
        root = S3Location.parse(str(data)) if is_s3(data) else Path(data)
        return Table(root).damaged_file() if is_table(root) else None
    except StoreDamaged as exc:
        return str(exc)
    except (ValueError, OSError):
        return None  # the store cannot be read at all: the command's own error says why


if __name__ == "__main__":
    sys.exit(main())
