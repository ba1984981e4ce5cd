"""``specmetrics db export``: a DuckDB database file holding the views over a table, for
the DuckDB CLI, notebooks and BI tools.

The file holds no data, only the view and macro definitions; the source views read the files of
the table that :func:`storage.readable.select_files` takes at export time, by absolute path, so
files the ingester commits later are seen after exporting again. Open it read-only
(``duckdb -readonly FILE``, ``duckdb.connect(FILE, read_only=True)``). Moving the table means
exporting again. Event times are UTC; window bounds with an offset are converted in the
session's time zone, so ``SET TimeZone = 'UTC'`` first (``connect()`` does).

Over a table on S3 the views read ``s3://`` URLs: the connection that opens the file needs a
file system for them, DuckDB's ``httpfs`` extension with an S3 secret, or in Python the one
:func:`queries.catalog.s3_filesystem` makes, registered on the connection. The file holds no
credential.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from specmetrics.queries.catalog import (
    GLOB_CHARS,
    create_source_views,
    create_views,
    register_storage,
    rollup_schema,
)
from specmetrics.storage.location import S3Location, address
from specmetrics.storage.readable import select_files


def export_database(data: Path | S3Location, target: Path, *, force: bool = False) -> Path:
    """Write ``target`` (a new DuckDB file) with every view and macro over the files readers
    take from ``data``: a local table, or one on S3 (its committed objects, by
    ``s3://`` URL)."""
    if target.exists() and not force:
        raise FileExistsError(f"{str(target)!r} exists: pass --force to replace it")
    root: Path | S3Location = data
    if isinstance(data, Path):
        root = data.resolve()
        if GLOB_CHARS & set(str(root)):
            raise ValueError(f"the data directory's path {str(root)!r} holds glob characters, which DuckDB would "
                             "read as a pattern: move or link it to a plain path")
    files = select_files(root, rollup_schema=rollup_schema() if isinstance(root, Path) else None)
    files.warn()
    where = address(root)
    if not files.files:
        raise FileNotFoundError(f"no data files of the ingester under {where!r}: not written by 'specmetrics "
                                "ingest', or not yet")
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.unlink(missing_ok=True)
    con = duckdb.connect(str(tmp))
    try:
        register_storage(con, root)  # the views are bound now, so the objects are read
        rollup_files = create_source_views(con, files)
        create_views(con, rollup_files=rollup_files)
        con.execute("CHECKPOINT")
    except BaseException:
        con.close()
        tmp.unlink(missing_ok=True)
        raise
    con.close()
    os.replace(tmp, target)
    return target

