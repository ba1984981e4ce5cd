"""Local log → Parquet: layout, idempotence, determinism, dead letters, crash recovery."""

from __future__ import annotations

import base64
import json
import os
import time
from datetime import timedelta
from pathlib import Path

import duckdb
import msgpack
import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from specmetrics.cli import main
from specmetrics.ingest import Ingester, IngestSettings
from specmetrics.ingest.batch import DUPLICATE_STEP
from specmetrics.ingest.recovery import recent_steps
from specmetrics.ingest.sources import LocalLogSource
from specmetrics.schemas import REQUEST_STEP_SCHEMA
from specmetrics.schemas.wire import FIELDS, MAX_EVENT_TIME_US, MIN_EVENT_TIME_US, step_event_to_wire
from specmetrics.storage.layout import DATA_GLOB, DEAD_LETTER_DIR, STATE_DIR
from specmetrics.storage.table import Table
from specmetrics.transport.log import LocalLogWriter
from tests.support.events import T0, step_event
from tests.support.ingest import (
    bad_outcomes_message,
    flush_files,
    ingest_once,
    ingest_tree_once,
    parquet_files,
    read_rows,
)
from tests.support.loadgen import write_load


def test_files_are_hive_partitioned_and_named_by_offsets(log_dir: Path, data_dir: Path) -> None:
    truth = write_load(log_dir, rows=5_000, batch_size=50, seed=3)
    stats = ingest_tree_once(log_dir, data_dir, flush_rows=2_000)
    assert stats.rows == 5_000 == sum(t.rows for t in truth.values())
    assert parquet_files(data_dir) == [
        "dt=2026-11-30/hour=12/log-0-00000000000000000000-00000000000000000039.parquet",
        "dt=2026-11-30/hour=12/log-0-00000000000000000040-00000000000000000079.parquet",
        "dt=2026-11-30/hour=12/log-0-00000000000000000080-00000000000000000099.parquet",
    ]
    table = read_rows(data_dir)
    assert table.schema.names == REQUEST_STEP_SCHEMA.names
    assert pq.read_schema(next(data_dir.glob(DATA_GLOB))).field("kind").type == REQUEST_STEP_SCHEMA.field("kind").type
    assert table["log_offset"].to_pylist()[::50] == list(range(100))
    assert json.loads((data_dir / STATE_DIR / "log.offsets.json").read_text()) == {"0": 100}


def test_steps_are_split_by_event_time_hour(log_dir: Path, data_dir: Path) -> None:
    writer = LocalLogWriter(log_dir)
    writer.append([step_event_to_wire(step_event(event_id=f"e{i}", event_time=T0 + timedelta(minutes=40 * i)))
                   for i in range(3)])
    ingest_tree_once(log_dir, data_dir, flush_event_time_s=7200)
    assert parquet_files(data_dir) == [
        f"dt=2026-11-30/hour={h}/log-0-00000000000000000000-00000000000000000002.parquet" for h in (12, 13)
    ]
    assert read_rows(data_dir).num_rows == 12


def test_steps_of_one_hour_around_another_hours_are_each_stored_once_in_their_hour(
        log_dir: Path, data_dir: Path) -> None:
    """A flush whose first and last steps share an hour and whose middle steps are of another (a
    replayed spool between live steps, an engine's clock an hour off): each hour's file holds its
    own rows only, every reader takes both, and ``verify`` is clean. (Each hour's file once got
    the whole flush when the first and last rows shared an hour: rows twice, and readers left the
    file out.)"""
    hours = [0, 1, 1, 0]
    LocalLogWriter(log_dir).append([step_event_to_wire(step_event(event_id=f"e{i}", event_time=T0 + timedelta(
        hours=h))) for i, h in enumerate(hours)])
    ingest_once(log_dir, data_dir, flush_event_time_s=7200)  # one flush
    assert flush_files(data_dir) == [
        f"dt=2026-11-30/hour={h}/log-0-00000000000000000000-00000000000000000003.parquet" for h in (12, 13)]
    for hour, steps in ((12, {"e0", "e3"}), (13, {"e1", "e2"})):
        [path] = (data_dir / "dt=2026-11-30" / f"hour={hour}").glob("*.parquet")
        assert set(pq.read_table(path, columns=["event_id"])["event_id"].to_pylist()) == steps
    assert main(["verify", "--data", str(data_dir)]) == 0


def test_files_rotate_by_event_time_not_only_by_size(log_dir: Path, data_dir: Path) -> None:
    writer = LocalLogWriter(log_dir)
    minutes = [0, 4, 9, 10, 12, 25]
    writer.append([step_event_to_wire(step_event(event_id=f"e{i}", event_time=T0 + timedelta(minutes=m)))
                   for i, m in enumerate(minutes)])
    ingest_tree_once(log_dir, data_dir, flush_event_time_s=600)
    assert parquet_files(data_dir) == [
        f"dt=2026-11-30/hour=12/log-0-{a:020d}-{b:020d}.parquet" for a, b in ((0, 2), (3, 4), (5, 5))
    ]


def test_interleaved_clocks_do_not_cut_a_file_per_step(log_dir: Path, data_dir: Path) -> None:
    """Two engines on one partition, one clock 20 minutes behind the other (or a replayed spool
    next to live steps): the file is cut when event time moves the window forward, not per step."""
    writer = LocalLogWriter(log_dir)
    writer.append([step_event_to_wire(step_event(event_id=f"e{i}", event_time=T0 + timedelta(minutes=20 * (i % 2))))
                   for i in range(40)])
    ingest_tree_once(log_dir, data_dir, flush_event_time_s=600)
    assert parquet_files(data_dir) == [
        f"dt=2026-11-30/hour=12/log-0-{a:020d}-{b:020d}.parquet" for a, b in ((0, 0), (1, 39))]


def test_running_twice_adds_nothing(log_dir: Path, data_dir: Path) -> None:
    write_load(log_dir, rows=3_000, seed=1)
    first = ingest_once(log_dir, data_dir)
    files = {p: (data_dir / p).read_bytes() for p in parquet_files(data_dir)}
    second = ingest_once(log_dir, data_dir)
    assert (first.rows, second.rows) == (3_008, 0)
    assert {p: (data_dir / p).read_bytes() for p in parquet_files(data_dir)} == files


def test_the_same_input_gives_the_same_files(log_dir: Path, tmp_path: Path) -> None:
    write_load(log_dir, rows=4_000, seed=2, engines=2)
    ingest_tree_once(log_dir, tmp_path / "a", flush_rows=1_500)
    ingest_tree_once(log_dir, tmp_path / "b", flush_rows=1_500)
    names = parquet_files(tmp_path / "a")
    assert len(names) == 3
    assert names == parquet_files(tmp_path / "b")
    assert read_rows(tmp_path / "a").equals(read_rows(tmp_path / "b"))


def test_bad_records_go_to_dead_letters_and_good_ones_around_them_are_kept(log_dir: Path, data_dir: Path) -> None:
    good = [step_event_to_wire(step_event(event_id=f"good-{i}")) for i in range(4)]
    wrong_major = msgpack.unpackb(good[0])
    wrong_major[0] = "2.0"
    dup_message = msgpack.unpackb(step_event_to_wire(step_event(event_id="dup")))
    dup_message[FIELDS.index("request_id_data")] = b"r1r1r3r4"
    bad = {
        1: (b"\x00not msgpack at all", "not a msgpack step message"),
        3: (msgpack.packb(wrong_major), "major version 2"),
        4: (bad_outcomes_message("unknown kind"), "outcome 1: unknown outcome kind code"),
        6: (bad_outcomes_message("accepted > k_valid"), "outcome 0: accepted exceeds k_valid"),
        7: (msgpack.packb(dup_message), "request_id r1 appears twice in one step"),
    }
    records = [good[0], bad[1][0], good[1], bad[3][0], bad[4][0], good[2], bad[6][0], bad[7][0], good[3]]
    LocalLogWriter(log_dir).append(records)
    stats = ingest_tree_once(log_dir, data_dir)
    assert (stats.rows, stats.dead_letters) == (16, 5)
    table = read_rows(data_dir)
    assert sorted(set(table["event_id"].to_pylist())) == ["good-0", "good-1", "good-2", "good-3"]
    assert sorted(set(table["log_offset"].to_pylist())) == [0, 2, 5, 8]
    letters = [json.loads(line) for line in
               (data_dir / DEAD_LETTER_DIR / "log-0-00000000000000000000-00000000000000000008.jsonl").read_text()
               .splitlines()]
    assert [letter["offset"] for letter in letters] == [1, 3, 4, 6, 7]
    for letter in letters:
        payload, reason = bad[letter["offset"]]
        assert base64.b64decode(letter["payload_base64"]) == payload
        assert reason in letter["reason"]


def _with(payload: bytes, **changes: object) -> bytes:
    message = msgpack.unpackb(payload)
    for key, value in changes.items():
        message[FIELDS.index(key)] = value
    return msgpack.packb(message)


def test_an_empty_record_is_dead_lettered_with_a_clear_reason(log_dir: Path, data_dir: Path) -> None:
    LocalLogWriter(log_dir).append([step_event_to_wire(step_event(event_id="good-0")), b"",
                                    step_event_to_wire(step_event(event_id="good-1"))])
    stats = ingest_once(log_dir, data_dir)
    assert (stats.records, stats.dead_letters) == (3, 1)
    assert sorted(set(read_rows(data_dir)["event_id"].to_pylist())) == ["good-0", "good-1"]
    [letter] = [json.loads(line) for path in (data_dir / DEAD_LETTER_DIR).glob("*.jsonl")
                for line in path.read_text().splitlines()]
    assert (letter["offset"], letter["reason"], letter["payload_base64"]) == (1, "empty message: 0 bytes", "")


def test_integers_out_of_range_are_dead_letters_not_a_crash(log_dir: Path, data_dir: Path) -> None:
    def good(i: int) -> bytes:
        return step_event_to_wire(step_event(event_id=f"good-{i}"))

    poison = [_with(good(9), step_index=2**63 + 5), _with(good(9), event_time_us=MAX_EVENT_TIME_US + 10),
              _with(good(9), event_time_us=2**64 - 1)]
    LocalLogWriter(log_dir).append([good(0), *poison, good(1)])
    stats = ingest_once(log_dir, data_dir)
    assert (stats.rows, stats.dead_letters) == (8, 3)
    assert sorted(set(read_rows(data_dir)["event_id"].to_pylist())) == ["good-0", "good-1"]
    assert json.loads((data_dir / STATE_DIR / "log.offsets.json").read_text()) == {"0": 5}


def test_the_first_and_last_storable_event_times_get_hive_folders_and_every_reader_takes_them(
        log_dir: Path, data_dir: Path, tmp_path: Path) -> None:
    """With the event-time bounds off: before, one step at 9999-12-31 made verify, sql and every
    report fail (an hour that ends past datetime's range)."""
    first, last = (step_event_to_wire(step_event(event_id=name)) for name in ("first", "last"))
    LocalLogWriter(log_dir).append([_with(first, event_time_us=MIN_EVENT_TIME_US),
                                    _with(last, event_time_us=MAX_EVENT_TIME_US, step_index=2**63 - 1)])
    assert ingest_once(log_dir, data_dir, max_ahead_s=0, max_behind_s=0).rows == 8
    assert flush_files(data_dir) == [
        "dt=0001-01-01/hour=00/log-0-00000000000000000000-00000000000000000000.parquet",
        "dt=9999-12-31/hour=23/log-0-00000000000000000001-00000000000000000001.parquet",
    ]
    data, out = str(data_dir), str(tmp_path / "reports")
    assert main(["verify", "--data", data]) == 0
    assert main(["sql", "--data", data, "SELECT count(*) FROM request_steps"]) == 0
    for window in ([], ["--since", "24h"], ["--since", "9999-12-31T23:00:00Z"], ["--raw"]):
        assert main(["report", "--data", data, "--out", out, "--format", "md,html", *window]) == 0, window


def test_a_step_dated_far_from_the_ingesters_clock_is_a_dead_letter_naming_both_times(
        log_dir: Path, data_dir: Path) -> None:
    event = step_event_to_wire(step_event())
    now_us = int(time.time() * 1e6)
    day_us, year_us = 86_400 * 10**6, 365 * 86_400 * 10**6
    times = [now_us, now_us + 2 * day_us,  # 2 days ahead
             now_us - 11 * year_us, MAX_EVENT_TIME_US, now_us - 9 * year_us]  # the last: an old log replayed
    LocalLogWriter(log_dir).append([_with(event, event_id=f"step-{i}", event_time_us=t) for i, t in enumerate(times)])
    stats = ingest_once(log_dir, data_dir)
    assert (stats.rows, stats.dead_letters) == (8, 3)
    letters = {line["offset"]: line["reason"] for path in (data_dir / DEAD_LETTER_DIR).glob("*.jsonl")
               for line in map(json.loads, path.read_text().splitlines())}
    assert sorted(letters) == [1, 2, 3]
    assert "s ahead of the ingester's clock (" in letters[1] and "SPECMETRICS_INGEST_MAX_AHEAD_S" in letters[1]
    assert letters[2].startswith("event time ") and "s behind the ingester's clock" in letters[2]
    assert "SPECMETRICS_INGEST_MAX_BEHIND_S" in letters[2] and "9999-12-31T23:59:59.999999" in letters[3]
    assert ingest_once(log_dir, tmp := data_dir.with_name("unbounded"), max_ahead_s=0, max_behind_s=0).rows == 20
    assert not (tmp / DEAD_LETTER_DIR).exists()


def _with_request_ids(payload: bytes, ids: list[bytes]) -> bytes:
    offsets = np.cumsum([0, *map(len, ids)], dtype=np.int32)
    return _with(payload, request_id_offsets=offsets.tobytes(), request_id_data=b"".join(ids))


def test_request_ids_the_contract_forbids_are_dead_letters_and_the_rest_stays_readable(
        log_dir: Path, data_dir: Path) -> None:
    good = [step_event_to_wire(step_event(event_id=f"good-{i}")) for i in range(40)]
    long_but_valid = "é" * 256  # 512 bytes, 256 characters
    good[7] = step_event_to_wire(step_event(event_id="good-7", outcomes=[
        {"kind": "drafted", "request_id": long_but_valid, "k_valid": 3, "accepted": 2, "emitted": 3}]))
    bad = {
        3: (_with_request_ids(good[0], [b"r1", b"\xff\xfe", b"r3", b"r4"]), "outcome 1: request_id is not valid UTF-8"),
        # split across two ids, the bytes of "é" are valid UTF-8 only when concatenated
        11: (_with_request_ids(good[0], [b"r1", b"r2\xc3", b"\xa9r3", b"r4"]),
             "outcome 1: request_id is not valid UTF-8"),
        20: (_with_request_ids(good[0], [b"r1", b"r2", b"r3", b"x" * 257]),
             "outcome 3: request_id has 257 characters, more than 256"),
        29: (_with_request_ids(good[0], [b"r1", b"r2", b"", b"r3r4"]), "outcome 2: empty request_id"),
        39: (_with(good[0], request_id_offsets=np.array([0, 6, 2, 4, 8], dtype=np.int32).tobytes()),
             "outcome 1: empty request_id"),
    }
    records = [_with(bad[i][0], event_id=f"bad-{i}") if i in bad else good[i] for i in range(40)]
    LocalLogWriter(log_dir).append(records)
    stats = ingest_tree_once(log_dir, data_dir)
    assert (stats.rows, stats.dead_letters) == (35 * 4 - 3, 5)
    letters = [json.loads(line) for line in
               (data_dir / DEAD_LETTER_DIR / "log-0-00000000000000000000-00000000000000000039.jsonl").read_text()
               .splitlines()]
    assert [(letter["offset"], letter["reason"]) for letter in letters] == [(i, why) for i, (_, why) in bad.items()]
    ids = duckdb.sql(f"SELECT request_id FROM read_parquet('{data_dir / DATA_GLOB}')").fetchall()
    assert len(ids) == stats.rows and (long_but_valid,) in ids


def test_dead_letters_alone_trigger_flushes_by_rows_and_by_bytes(log_dir: Path, tmp_path: Path) -> None:
    wrong_major = msgpack.unpackb(step_event_to_wire(step_event()))
    wrong_major[0] = "2.0"
    bad = msgpack.packb(wrong_major)
    LocalLogWriter(log_dir).append([bad] * 250)
    assert ingest_tree_once(log_dir, tmp_path / "rows", flush_rows=100).dead_letters == 250
    assert sorted(p.name for p in (tmp_path / "rows" / DEAD_LETTER_DIR).iterdir()) == [
        f"log-0-{a:020d}-{b:020d}.jsonl" for a, b in ((0, 99), (100, 199), (200, 249))]
    ingest_tree_once(log_dir, tmp_path / "bytes", flush_bytes=60 * len(bad))
    assert len(list((tmp_path / "bytes" / DEAD_LETTER_DIR).iterdir())) == 5


def test_a_second_ingester_of_the_same_log_and_output_is_refused(
        log_dir: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    truth = write_load(log_dir, rows=2_000, seed=4)
    first = LocalLogSource(log_dir, data_dir / STATE_DIR)
    try:
        argv = ["ingest", "--source", f"file://{log_dir}", "--out", str(data_dir), "--once", "--quiet"]
        assert main(argv) == 2
        assert f"another ingester (pid {os.getpid()}) is reading this log into {data_dir}: " \
               f"it holds {data_dir / STATE_DIR / 'log.lock'}" in capsys.readouterr().err
        assert parquet_files(data_dir) == []
        with pytest.raises(ValueError, match=r"log\.lock"):
            LocalLogSource(log_dir, data_dir / STATE_DIR)
    finally:
        first.close()
    assert main(argv) == 0
    assert read_rows(data_dir).num_rows == sum(t.rows for t in truth.values())


class CrashingSource(LocalLogSource):
    """A source whose process 'dies' at its first commit: files are written, the offset is not."""

    def commit(self, next_offsets: dict[int, int]) -> None:
        raise SystemExit("killed before commit")


def test_a_crash_between_file_and_commit_keeps_the_file_and_reads_on_after_it(log_dir: Path, data_dir: Path) -> None:
    truth = write_load(log_dir, rows=6_000, seed=5)
    source = CrashingSource(log_dir, data_dir / STATE_DIR)
    ingester = Ingester(source, data_dir, IngestSettings(flush_rows=2_500))
    with pytest.raises(SystemExit):
        ingester.run(once=True)
    ingester.close()
    source.close()  # the process dies: its lock goes with it
    durable = parquet_files(data_dir)
    assert len(durable) == 1
    first = pq.read_table(data_dir / durable[0])
    stats = ingest_once(log_dir, data_dir, flush_rows=2_500)
    assert stats.rows + first.num_rows == sum(t.rows for t in truth.values())  # nothing read twice
    table = read_rows(data_dir)
    keys = pc.binary_join_element_wise(table["event_id"].cast("string"), table["request_id"], "|")
    assert pc.count_distinct(keys).as_py() == table.num_rows == sum(t.rows for t in truth.values())
    assert parquet_files(data_dir)[0] == durable[0] and pq.read_table(data_dir / durable[0]).equals(first)


def test_a_request_step_costs_at_most_3_2_bytes_of_parquet(log_dir: Path, data_dir: Path) -> None:
    """3.05 here, about half of it seq_len (schema 1.5)."""
    write_load(log_dir, rows=300_000, engines=2, seed=8)
    stats = ingest_once(log_dir, data_dir)
    size = sum(p.stat().st_size for p in data_dir.glob(DATA_GLOB))
    assert size / stats.rows <= 3.2


def test_a_step_sent_twice_is_stored_and_counted_once_and_the_copy_is_set_aside(
        log_dir: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A producer that resends steps whose acknowledgement it lost puts a second copy of each at a
    later offset: the copies are dead letters with the reason, the views count each step once,
    and ``verify`` says records were set aside (exit 3). Off (``dedupe_steps=0``), both copies are
    stored and ``verify`` names the duplicates (exit 1). A record read again at its own offset (a
    second run) is not a copy."""
    steps = [step_event_to_wire(step_event(event_id=f"boot-{i}")) for i in range(4)]
    LocalLogWriter(log_dir).append([*steps, steps[1], steps[2], step_event_to_wire(step_event(event_id="boot-4"))])
    stats = ingest_once(log_dir, data_dir)
    assert (stats.rows, stats.dead_letters) == (5 * 4, 2)
    letters = [json.loads(line) for path in sorted((data_dir / DEAD_LETTER_DIR).glob("*.jsonl"))
               for line in path.read_text().splitlines()]
    assert [(letter["offset"], letter["reason"]) for letter in letters] == [(4, DUPLICATE_STEP), (5, DUPLICATE_STEP)]
    counted = main(["sql", "--data", str(data_dir), "--format", "csv", "SELECT (SELECT num_drafts FROM "
                    "acceptance_vllm), count(*), count(DISTINCT event_id) FROM request_steps"])
    assert counted == 0 and capsys.readouterr().out.splitlines()[-1] == "15,20,5"  # 3 vLLM drafts a step
    assert main(["verify", "--data", str(data_dir)]) == 3
    assert "duplicate step" in capsys.readouterr().out
    assert ingest_once(log_dir, data_dir).rows == 0  # nothing new
    both = data_dir.with_name("both")
    assert ingest_once(log_dir, both, dedupe_steps=0).rows == 7 * 4
    assert main(["verify", "--data", str(both)]) == 1


def test_a_copy_read_after_a_restart_is_set_aside_from_what_the_files_hold(log_dir: Path, data_dir: Path) -> None:
    """The ingester stopped after storing a step; its producer's copy arrives later: the new
    ingester knows the stored steps' event ids (``ingest.recovery.recent_steps``) and sets it aside."""
    steps = [step_event_to_wire(step_event(event_id=f"boot-{i}")) for i in range(5)]
    writer = LocalLogWriter(log_dir)
    writer.append(steps[:3])
    assert ingest_once(log_dir, data_dir).rows == 3 * 4
    writer.append([steps[3], steps[2], steps[0], steps[4]])
    # It remembers the last three steps read: 0, 1 and 2 from the files, then 1, 2 and 3.
    stats = ingest_once(log_dir, data_dir, dedupe_steps=3)
    assert (stats.rows, stats.dead_letters) == (3 * 4, 1)  # 0's copy is further back than that: stored
    letters = [json.loads(line) for path in sorted((data_dir / DEAD_LETTER_DIR).glob("*.jsonl"))
               for line in path.read_text().splitlines()]
    assert [(letter["offset"], letter["reason"]) for letter in letters] == [(4, DUPLICATE_STEP)]


def test_a_copy_read_after_another_engines_optimize_is_set_aside_too(log_dir: Path, data_dir: Path) -> None:
    """Another engine's OPTIMIZE merged the stored flushes into a file named without source or
    offsets; the new ingester still knows their event ids, from that file's rows of the partition
    (before: it read only files named for the source, remembered nothing, and stored the copy)."""
    steps = [step_event_to_wire(step_event(event_id=f"boot-{i}")) for i in range(4)]
    writer = LocalLogWriter(log_dir)
    writer.append(steps[:3])
    assert ingest_once(log_dir, data_dir, flush_rows=4).rows == 3 * 4  # three flushes
    assert recent_steps(Table(data_dir), "log", 0, 10) == {"boot-0": 0, "boot-1": 1, "boot-2": 2}
    assert DeltaTable(str(data_dir)).optimize.compact()["numFilesRemoved"] == 3
    assert recent_steps(Table(data_dir), "log", 0, 10) == {"boot-0": 0, "boot-1": 1, "boot-2": 2}
    assert recent_steps(Table(data_dir), "log", 1, 10) == {}  # its statistics: partition 0 only
    writer.append([steps[3], steps[1]])
    stats = ingest_once(log_dir, data_dir)
    assert (stats.rows, stats.dead_letters) == (4, 1)
