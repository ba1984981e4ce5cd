"""Local log → a Delta table of durable Parquet, end to end, next to the ceiling: a plain pyarrow
write of the same rows from memory, in the same run.

Pre-fills a local log with the load generator, runs ``specmetrics ingest --once`` logic over
it into a table (a Delta commit per flush), reads the committed rows back and writes them again
with ``pyarrow.parquet.write_table`` (same codec and row groups). Rounds alternate the two; the
best of each is reported. Prints one JSON line.

    python -m benchmarks.bench_ingest [--rows 4000000] [--rounds 3] [--flush-rows N] [--s3]

``--s3`` also ingests into a table on S3 each round (SeaweedFS on loopback, started here).
``seq_len_bytes_per_row``: the costliest column as stored, and in the encodings that would pack it
tighter (storage.parquet says why it is not); ``bytes_per_row_if``: the rows without it, with it
only where a step was skipped for length, and ordered by request.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from benchmarks.args import positive_int
from devtools.s3_server import SeaweedS3
from specmetrics.emitter.loadgen import LoadSpec, run_load
from specmetrics.emitter.sinks import LocalLogSink
from specmetrics.ingest import Ingester, IngestSettings
from specmetrics.ingest.observer import IngestObserver
from specmetrics.ingest.sources import LocalLogSource
from specmetrics.storage.layout import STATE_DIR
from specmetrics.storage.location import S3Location
from specmetrics.storage.table import Table


def ingest_seconds(log_dir: Path, out: Path, settings: IngestSettings,
                   observer: IngestObserver | None = None) -> tuple[float, int]:
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    source = LocalLogSource(log_dir, out / STATE_DIR)
    ingester = Ingester(source, out, settings, observer=observer)
    stats = ingester.run(once=True)
    ingester.close()
    source.close()
    return time.perf_counter() - start, stats.rows


def s3_ingest_seconds(log_dir: Path, server: SeaweedS3, state: Path, settings: IngestSettings) -> tuple[float, int]:
    """Ingest into a table in a fresh bucket of ``server``."""
    bucket = f"bench-{uuid.uuid4().hex[:8]}"
    server.create_bucket(bucket)
    shutil.rmtree(state, ignore_errors=True)
    start = time.perf_counter()
    source = LocalLogSource(log_dir, state)
    ingester = Ingester(source, S3Location.parse(f"s3://{bucket}/data"), settings)
    stats = ingester.run(once=True)
    ingester.close()
    source.close()
    return time.perf_counter() - start, stats.rows


def plain_write_seconds(table: pa.Table, path: Path, settings: IngestSettings) -> float:
    start = time.perf_counter()
    pq.write_table(table, path, compression=settings.compression, row_group_size=settings.row_group_rows)
    return time.perf_counter() - start


def seq_len_bytes(files: list[Path], rows: int, settings: IngestSettings) -> dict[str, float]:
    """Bytes per request-step of ``seq_len`` as stored (dictionary) and in the two encodings that pack
    it tighter, the column alone written again with the same codec (storage.parquet says why not)."""
    stored = sum(metadata.row_group(group).column(metadata.schema.names.index("seq_len")).total_compressed_size
                 for metadata in map(pq.read_metadata, files) for group in range(metadata.num_row_groups))
    column = pa.concat_tables(pq.read_table(f, columns=["seq_len"]) for f in files)
    sizes = {"stored": stored}
    for encoding in ("DELTA_BINARY_PACKED", "BYTE_STREAM_SPLIT"):
        sink = pa.BufferOutputStream()
        pq.write_table(column, sink, compression=settings.compression, row_group_size=settings.row_group_rows,
                       use_dictionary=False, column_encoding={"seq_len": encoding})
        written = pq.read_metadata(pa.BufferReader(sink.getvalue()))
        sizes[encoding.lower()] = sum(written.row_group(group).column(0).total_compressed_size
                                      for group in range(written.num_row_groups))
    return {name: round(size / rows, 3) for name, size in sizes.items()}


def layout_bytes(files: list[Path], rows: int, settings: IngestSettings) -> dict[str, float]:
    """Bytes per request-step of the stored rows written again as one table (the ingester's codec and
    row groups) without ``seq_len``; with it only on the rows skipped for length (the one place a
    view reads it); and ordered by engine, request and step, so that each request's lengths follow
    each other (dictionaries, and ``seq_len`` delta-encoded): what issue 42's 1.5 bytes would take."""
    table = pa.concat_tables(pq.read_table(f) for f in files)
    skipped = pc.equal(table["kind"].cast(pa.string()), "skipped_for_length")
    where_skipped = pc.if_else(skipped, table["seq_len"], pa.scalar(None, pa.int32()))
    keys = pa.table({"engine": table["engine_instance"].cast(pa.string()), "request": table["request_id"],
                     "step": table["step_index"]})
    by_request = table.take(pc.sort_indices(keys, sort_keys=[(key, "ascending") for key in keys.column_names]))
    delta = {"use_dictionary": [name for name in table.column_names if name != "seq_len"],
             "column_encoding": {"seq_len": "DELTA_BINARY_PACKED"}}
    layouts = {"without_seq_len": (table.drop_columns(["seq_len"]), {}),
               "seq_len_where_skipped": (table.set_column(table.schema.get_field_index("seq_len"), "seq_len",
                                                          where_skipped), {}),
               "ordered_by_request": (by_request, {}),
               "ordered_by_request_seq_len_delta": (by_request, delta)}
    sizes = {}
    for name, (layout, encoding) in layouts.items():
        sink = pa.BufferOutputStream()
        pq.write_table(layout, sink, compression=settings.compression, row_group_size=settings.row_group_rows,
                       **encoding)
        sizes[name] = round(len(sink.getvalue()) / rows, 3)
    return sizes


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=positive_int, default=4_000_000)
    parser.add_argument("--rounds", type=positive_int, default=3)
    parser.add_argument("--flush-rows", type=positive_int, default=None,
                        help="Rows per flush (default: the ingester's, 1,000,000); a table commits once per flush.")
    parser.add_argument("--s3", action="store_true", help="Also ingest into a table on S3 (SeaweedFS on loopback).")
    args = parser.parse_args(argv)
    settings = IngestSettings(**({"flush_rows": args.flush_rows} if args.flush_rows else {}))
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        root = Path(tmp)
        server = stack.enter_context(SeaweedS3(root / "seaweed")) if args.s3 else None
        if server is not None:
            os.environ.update(server.environment())
        with LocalLogSink(root / "log") as sink:
            run_load(LoadSpec(rows=args.rows, engines=4, seed=1), sink)
        log_bytes = sum(p.stat().st_size for p in (root / "log").glob("*.log"))
        ingest_times, write_times, s3_times = [], [], []
        rows = 0
        for _ in range(args.rounds):
            seconds, rows = ingest_seconds(root / "log", root / "out", settings)
            ingest_times.append(seconds)
            if server is not None:
                seconds, s3_rows = s3_ingest_seconds(root / "log", server, root / "s3-state", settings)
                assert s3_rows == rows, (s3_rows, rows)
                s3_times.append(seconds)
            files = sorted(file.path for file in Table(root / "out").files())
            table = pa.concat_tables(pq.read_table(f) for f in files)
            write_times.append(plain_write_seconds(table, root / "plain.parquet", settings))
            del table
        parquet_bytes = sum(f.stat().st_size for f in files)
        e2e, ceiling = rows / min(ingest_times), rows / min(write_times)
        s3 = {"s3_rows_per_s": round(rows / min(s3_times)),
              "s3_vs_local_table": round(rows / min(s3_times) / e2e, 3)} if s3_times else {}
        print(json.dumps({
            "bench": "ingest_local_log_to_parquet", "rows": rows, "files": len(files),
            "e2e_rows_per_s": round(e2e), "plain_write_rows_per_s": round(ceiling),
            "e2e_vs_plain_write": round(e2e / ceiling, 3),
            "parquet_bytes_per_row": round(parquet_bytes / rows, 2), "log_bytes_per_row": round(log_bytes / rows, 1),
            "seq_len_bytes_per_row": seq_len_bytes(files, rows, settings),
            "bytes_per_row_if": layout_bytes(files, rows, settings),
            "compression": settings.compression, "flush_rows": settings.flush_rows, **s3,
        }))


if __name__ == "__main__":
    main()
