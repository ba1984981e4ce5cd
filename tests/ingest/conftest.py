"""Helpers for ingest tests."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ingest import Ingester, IngestSettings, IngestStats
from ingest.output import STATE_DIR
from ingest.sources import LocalLogSource


def ingest_once(log_dir: Path, data_dir: Path, **settings: float) -> IngestStats:
    ingester = Ingester(LocalLogSource(log_dir, data_dir / STATE_DIR), data_dir, IngestSettings(**settings))
    try:
        return ingester.run(once=True)
    finally:
        ingester.close()


def parquet_files(data_dir: Path) -> list[str]:
    return sorted(str(p.relative_to(data_dir)) for p in data_dir.rglob("*.parquet"))


def read_rows(data_dir: Path) -> pa.Table:
    files = sorted(data_dir.rglob("*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files]) if files else pa.table({})
