"""``specmetrics db export``: a DuckDB database file holding the views over a Parquet tree, for
the DuckDB CLI, notebooks and BI tools.

The file holds no data, only the view and macro definitions; the source view reads the tree by
its absolute path each time, so files the ingester adds later are seen. Open it read-only
(``duckdb -readonly FILE``, ``duckdb.connect(FILE, read_only=True)``). Moving the tree means
exporting again. Event times are UTC; window bounds with an offset are converted in the
session's time zone, so ``SET TimeZone = 'UTC'`` first (``connect()`` does).
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from ingest.layout import DATA_GLOB
from queries.catalog import (
    GLOB_CHARS,
    ROLLUP_GLOB,
    ROLLUP_SOURCE_VIEW,
    SOURCE_VIEW,
    comment_rollup_source,
    comment_source,
    create_views,
    partition_casts,
)


def export_database(data_dir: Path, target: Path, *, force: bool = False) -> Path:
    """Write ``target`` (a new DuckDB file) with every view and macro over ``data_dir``."""
    root = data_dir.expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"data directory {str(root)!r} does not exist or is not a directory")
    root = root.resolve()
    if not any(root.glob(DATA_GLOB)):
        raise FileNotFoundError(f"no Parquet files under {str(root)!r} yet: run 'specmetrics ingest' first "
                                f"(DuckDB checks a view's files when the view is created)")
    if target.exists() and not force:
        raise FileExistsError(f"{str(target)!r} exists: pass --force to replace it")
    if GLOB_CHARS & set(str(root)):
        raise ValueError(f"the data directory's path {str(root)!r} holds glob characters, which DuckDB would "
                         "read as a pattern: move or link it to a plain path")
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.unlink(missing_ok=True)
    con = duckdb.connect(str(tmp))
    try:
        # A view definition cannot take a bound parameter: the path is a quoted SQL string literal.
        glob = _literal(str(root / DATA_GLOB))
        con.execute(f"CREATE VIEW {SOURCE_VIEW} AS SELECT * REPLACE ({partition_casts()}) "
                    f"FROM read_parquet({glob}, hive_partitioning = true, union_by_name = true)")
        comment_source(con)
        rollup_files = any(root.glob(ROLLUP_GLOB))
        if rollup_files:
            con.execute(f"CREATE VIEW {ROLLUP_SOURCE_VIEW} AS SELECT * REPLACE ({partition_casts()}) "
                        f"FROM read_parquet({_literal(str(root / ROLLUP_GLOB))}, hive_partitioning = true)")
            comment_rollup_source(con)
        create_views(con, rollup_files=rollup_files)
        con.execute("CHECKPOINT")
    except BaseException:
        con.close()
        tmp.unlink(missing_ok=True)
        raise
    con.close()
    os.replace(tmp, target)
    return target


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
