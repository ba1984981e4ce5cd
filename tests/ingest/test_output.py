"""The ingester's writes (real files): a flush's rows split by event-time hour, each file saying how
many files its flush wrote, and its dead letters and lost ranges as JSON lines."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from specmetrics.ingest.batch import DeadLetter
from specmetrics.ingest.output import write_dead_letters, write_lost_range, write_partitioned
from specmetrics.storage.layout import FLUSH_FILES_KEY, FileName
from specmetrics.storage.parquet import FileStats, ParquetOptions

HOUR_US = 3_600_000_000


def test_a_flush_is_split_by_hour_and_each_file_counts_the_flush(tmp_path: Path) -> None:
    name = FileName("log", 0, 10, 12, "0123456789ab")
    times = np.array([0, HOUR_US + 5, 5], dtype=np.int64) + 490_000 * HOUR_US  # hours h, h + 1, h
    table = pa.table({"event_time": pa.array(times, pa.timestamp("us")), "log_partition": pa.array([0] * 3, pa.int32()),
                      "log_offset": [10, 11, 12]})
    pairs = write_partitioned(tmp_path, name, table, times, ParquetOptions(), other_files=1)
    written = [file for file, _ in pairs]
    assert [file.relative for file in written] == [
        f"dt=2025-11-24/hour={hour}/log-0-00000000000000000010-00000000000000000012.0123456789ab.parquet"
        for hour in ("16", "17")]
    assert [pq.read_table(file.path)["log_offset"].to_pylist() for file in written] == [[10, 12], [11]]
    assert {pq.read_metadata(file.path).metadata[FLUSH_FILES_KEY.encode()] for file in written} == {b"3"}
    hour = datetime(2025, 11, 24, 16)
    assert [(data.relative, data.size) for _, data in pairs] == [(file.relative, file.size) for file in written]
    assert [data.stats for _, data in pairs] == [  # each file's own rows and bounds, for its commit
        FileStats(2, (hour, 0, 10), (hour + timedelta(microseconds=5), 0, 12)),
        FileStats(1, (later := hour + timedelta(hours=1, microseconds=5), 0, 11), (later, 0, 11))]
    empty = write_partitioned(tmp_path, FileName("log", 0, 13, 13, "0123456789ac"), table.slice(0, 0),
                              np.zeros(0, dtype=np.int64), ParquetOptions(), empty_at_us=490_000 * HOUR_US)
    assert [pq.read_metadata(file.path).num_rows for file, _ in empty] == [0]  # its name still covers offset 13
    assert [data.stats for _, data in empty] == [FileStats(0)]


def test_dead_letters_and_a_lost_range_are_json_lines_with_their_offsets(tmp_path: Path) -> None:
    name = FileName("log", 2, 5, 9, "0123456789ab")
    letters = write_dead_letters(tmp_path, name, [DeadLetter(2, 6, "not a msgpack step message", b"\x00bad")], 2)
    [line] = [json.loads(text) for text in letters.path.read_text().splitlines()]
    assert (line["partition"], line["offset"], line["reason"], line[FLUSH_FILES_KEY]) == \
        (2, 6, "not a msgpack step message", 2)
    assert base64.b64decode(line["payload_base64"]) == b"\x00bad"
    lost = write_lost_range(tmp_path, FileName("log", 2, 10, 19, "0123456789ac"), "segment deleted")
    assert json.loads(lost.path.read_text()) == {"lost": True, "source": "log", "partition": 2, "offset": 10,
                                                 "last_offset": 19, "reason": "segment deleted", FLUSH_FILES_KEY: 1}
