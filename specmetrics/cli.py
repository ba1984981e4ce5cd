"""``specmetrics``: one command, one subcommand per job."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

#: The subcommands, each parsed and run by its module under specmetrics.commands (``create-topics``:
#: ``create_topics``). A run imports only its command's module (``specmetrics health``, a container's
#: healthcheck, none of DuckDB, pyarrow or the ingester): the others are registered by name alone.
COMMANDS = ("demo", "ingest", "verify", "rollup", "sql", "db", "table", "report", "loadgen", "schema", "create-topics",
            "health", "serve")


def _command_module(name: str) -> ModuleType:
    return importlib.import_module(f"specmetrics.commands.{name.replace('-', '_')}")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or, given ``command``, of that one in full and of the others by
    name only (their options are not needed to parse a run of ``command``)."""
    parser = argparse.ArgumentParser(
        prog="specmetrics",
        description="The truth about speculative decoding in vLLM: step events -> log -> Parquet -> SQL.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="More log output (-vv: debug).")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        if command is None or name == command:
            _command_module(name).add_parser(subparsers)
        else:
            subparsers.add_parser(name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    named = next((word for word in argv if not word.startswith("-")), None)
    args = build_parser(named if named in COMMANDS else None).parse_args(argv)
    level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(args.verbose, 2)]
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # kafka-python logs every failed connection attempt; the commands say in one line what failed.
    logging.getLogger("kafka").setLevel((logging.CRITICAL, logging.WARNING, logging.DEBUG)[min(args.verbose, 2)])
    try:
        result: int = args.run(args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        from specmetrics.storage.damage import StoreDamaged

        if isinstance(exc, StoreDamaged):
            print(f"specmetrics {args.command}: error: {exc}", file=sys.stderr)
            return StoreDamaged.exit_code
        if not isinstance(exc, (ValueError, OSError)) and not _duckdb_error(exc):
            raise
        damage = _damage(args) if _read_error(exc) else None
        print(f"specmetrics {args.command}: error: {damage or exc}", file=sys.stderr)
        return StoreDamaged.exit_code if damage else 2
    return result


def _duckdb_error(exc: BaseException) -> bool:
    """Whether ``exc`` is DuckDB's (never, where the command did not import DuckDB)."""
    duckdb: Any = sys.modules.get("duckdb")
    return duckdb is not None and isinstance(exc, duckdb.Error)


def _read_error(exc: BaseException) -> bool:
    """Whether ``exc`` may come from reading a damaged file: DuckDB's read errors, pyarrow's (an OSError
    without an errno, as "Couldn't deserialize thrift"), not a system call's or a connection's."""
    duckdb: Any = sys.modules.get("duckdb")
    pyarrow: Any = sys.modules.get("pyarrow")
    # DuckDB names a broken footer with a bare duckdb.Error.
    if duckdb is not None and type(exc) in (duckdb.Error, duckdb.IOException, duckdb.InvalidInputException,
                                            duckdb.InternalException):
        return True
    if pyarrow is not None and isinstance(exc, pyarrow.ArrowException):
        return True
    return type(exc) is OSError and exc.errno is None


def _damage(args: argparse.Namespace) -> str | None:
    """The damaged file of the table a command read (``--data``) or wrote (``--out``) that made it
    fail, named, if one is: DuckDB and pyarrow name none."""
    data = getattr(args, "data", None) or getattr(args, "out", None)
    if not isinstance(data, str | Path):
        return None
    from specmetrics.storage.damage import StoreDamaged
    from specmetrics.storage.location import data_root
    from specmetrics.storage.table import Table, is_table

    try:
        root = data_root(data)
        return Table(root).damaged_file() if is_table(root) else None
    except StoreDamaged as exc:
        return str(exc)
    except (ValueError, OSError):
        return None  # the store cannot be read at all: the command's own error says why


if __name__ == "__main__":
    sys.exit(main())
