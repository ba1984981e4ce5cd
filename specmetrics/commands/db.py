"""``specmetrics db export FILE``: the views over a table as a DuckDB database file, or
(``--dialect spark``) as Spark SQL statements for a cluster."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from specmetrics.commands import DATA_HELP
from specmetrics.queries.catalog import SOURCE_VIEW
from specmetrics.queries.export import export_database
from specmetrics.queries.spark import SPARK_VIEWS, spark_statements
from specmetrics.storage.durable import write_atomically
from specmetrics.storage.location import S3Location, data_root


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("db", help="DuckDB database files with the views, for other tools.")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    export = actions.add_parser(
        "export", help="Write FILE.duckdb with every view and macro over the table (no data is copied); "
                       "with --dialect spark, FILE.sql with the Spark views over a source view raw_request_steps.")
    export.add_argument("file", type=Path, help="The file to write, e.g. specmetrics.duckdb or views.sql.")
    export.add_argument("--data", help=f"{DATA_HELP} DuckDB only.")
    export.add_argument("--dialect", choices=("duckdb", "spark"), default="duckdb",
                        help="duckdb (default): a database file; spark: the statements of "
                             f"{', '.join(SPARK_VIEWS)} and the views they read, in Spark SQL (docs/queries.md).")
    export.add_argument("--force", action="store_true", help="Replace FILE if it exists.")
    export.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.dialect == "spark":
        if args.file.exists() and not args.force:
            raise FileExistsError(f"{str(args.file)!r} exists: pass --force to replace it")
        statements = spark_statements()
        write_atomically(args.file, "".join(f"{statement};\n\n" for statement in statements).encode())
        print(f"wrote {args.file}: {len(statements)} Spark SQL views over a view named {SOURCE_VIEW} (the committed "
              "data files; docs/queries.md shows how to make it)")
        return 0
    if args.data is None:
        raise ValueError("--data is required with --dialect duckdb")
    root = data_root(args.data)
    path = export_database(root, args.file, force=args.force)
    if isinstance(root, S3Location):
        print(f"wrote {path}: the views over {args.data}; open it read-only on a connection that reads s3:// "
              "(DuckDB's httpfs with an S3 secret, or queries.catalog.s3_filesystem; docs/queries.md)")
        return 0
    print(f"wrote {path}: the views over {root.resolve()}; open it read-only, e.g. "
          f"duckdb -readonly {path} -c 'FROM acceptance_diff'")
    return 0
