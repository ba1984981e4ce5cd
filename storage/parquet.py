"""How the table's data files are written: one writer for the ingester's flushes and the files
``table optimize`` merges, so both encode alike.

Every column is dictionary-encoded, the Parquet writer's default. Encodings that pack a request's
own length (``seq_len``, 1.47 of 3.0 bytes a row) tighter exist, but Spark's vectorized reader
(4.0) refuses BYTE_STREAM_SPLIT (1.11 bytes) and DELTA_BINARY_PACKED saves 1 % (BENCHMARKS.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


@dataclass(frozen=True, slots=True)
class ParquetOptions:
    compression: str = "zstd"
    compression_level: int | None = None
    row_group_rows: int = 1_000_000


def write_data_file(table: pa.Table, options: ParquetOptions, where: Path | pa.NativeFile) -> None:
    """Write ``table`` as one Parquet file (with page checksums, which ``verify --pages`` checks)."""
    pq.write_table(table, where, compression=options.compression, compression_level=options.compression_level,
                   row_group_size=options.row_group_rows, write_page_checksum=True)
