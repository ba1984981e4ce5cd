"""Ingesting into a table (the default layout, storage.table): each flush one commit with its offsets, and
every reader takes the committed files only. The same numbers as a tree; a file dropped into the
folders is neither read nor mistaken for a stored flush; exactly once under SIGKILL."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from specmetrics.cli import main
from specmetrics.ingest import Ingester, IngestSettings, IngestStats
from specmetrics.ingest.convert import convert_tree
from specmetrics.ingest.sources import LocalLogSource
from specmetrics.ingest.sources.base import OnAssigned, OnLost, OnRevoked, SourceRecord
from specmetrics.storage.layout import DATA_GLOB, DEAD_LETTER_DIR, STATE_DIR, FileName
from specmetrics.storage.table import LOG_DIR, DataFile, Table
from tests.support.events import T0
from tests.support.ingest import append_bad_record, assert_rows_once, ingest_once, ingest_tree_once, read_rows
from tests.support.loadgen import write_load
from tests.support.readers import numbers, report

ROOT = Path(__file__).resolve().parents[2]
def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specmetrics.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300, check=False)


def test_a_table_holds_what_a_tree_holds_and_every_reader_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    truth = write_load(tmp_path / "log", rows=24_000, seed=5, engines=2, step_ms=40.0,
                       start_time=T0 - timedelta(minutes=20))
    ingest_tree_once(tmp_path / "log", tmp_path / "tree", flush_rows=3_000)
    convert_tree(tmp_path / "tree")  # a tree an older ingester wrote, made a table
    stats = ingest_once(tmp_path / "log", tmp_path / "table", flush_rows=3_000)
    assert stats.rows == sum(t.rows for t in truth.values()) == 24_000
    table = Table(tmp_path / "table")
    assert table.position("log", 0) == 24_000 // 64
    assert len({file.path.name.split(".")[1] for file in table.files()}) == len(table.files())  # one attempt each
    assert numbers(tmp_path / "table") == numbers(tmp_path / "tree")
    accepted = {row["engine_id"]: row["num_accepted_tokens"] for row in numbers(tmp_path / "table")[1]}
    assert accepted == {engine: t.num_accepted_tokens for engine, t in truth.items()}
    assert main(["verify", "--data", str(tmp_path / "table")]) == 0
    # The report builds rollups of the committed files, and reads them the second time.
    reports = [report(tmp_path / data, tmp_path / f"report-{n}") for n, data in enumerate(("table", "table", "tree"))]
    assert reports[1] == reports[2]
    assert main(["verify", "--data", str(tmp_path / "table")]) == 0
    assert "data files without a rollup yet: 0" in capsys.readouterr().out


def test_a_forged_file_is_not_counted_and_no_real_row_is_skipped(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The case a tree gets wrong: a file with an ingester's name for the next offsets and foreign
    rows is counted by readers, and the next ingest resumes after it, never storing those offsets."""
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=200_000, seed=8, engine_prefix="first")
    ingest_once(log, data, flush_rows=20_000)
    real = pq.read_table(Table(data).files()[0].path)
    forged_rows = pa.concat_tables([real] * 2).slice(0, 3_200)
    end = 200_000 // 64
    forged = data / Table(data).files()[0].path.parent.relative_to(data) / \
        FileName("log", 0, end, end + 99).render("parquet")
    pq.write_table(forged_rows, forged)
    assert numbers(data)[0] == [{"engine_id": "first-0/dp0", "rows": 200_000, "accepted": pytest.approx(
        numbers(data)[0][0]["accepted"])}]
    assert main(["verify", "--data", str(data)]) == 0
    assert f"not in the table's log (never read): {forged.relative_to(data)}" in capsys.readouterr().out
    write_load(log, rows=6_400, seed=9, engine_prefix="second")
    assert ingest_once(log, data, flush_rows=20_000).rows == 6_400
    assert_rows_once(data, 206_400)
    assert [row["rows"] for row in numbers(data)[0]] == [200_000, 6_400]
    assert forged.exists()


def test_a_committed_file_missing_or_changed_fails_verify_and_readers_name_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=64 * 30, seed=12)
    ingest_once(log, data, flush_rows=64 * 10)
    assert main(["verify", "--data", str(data)]) == 0
    first, second = sorted(file.path for file in Table(data).files())[:2]
    first.unlink()
    with second.open("ab") as file:
        file.write(b"more")
    assert numbers(data)[0][0]["rows"] == 64 * 10
    assert f"left out {first.relative_to(data)}: named by the table's log, but missing" in caplog.text
    assert main(["verify", "--data", str(data)]) == 1
    out = capsys.readouterr().out
    assert f"left out by readers: {second.relative_to(data)}: named by the table's log with " in out
    assert out.rstrip().endswith("NOT clean")


def test_sigkill_at_random_moments_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    log, data = tmp_path / "log", tmp_path / "data"
    expected = sum(t.rows for t in write_load(log, rows=300_000, seed=11, engines=2).values())
    rng = random.Random(17)
    commits = []
    for _ in range(10):
        before = max(len(list((data / LOG_DIR).glob("*.json"))), 2)  # the first run: creation and claim
        proc = subprocess.Popen(
            [sys.executable, "-m", "specmetrics.cli", "ingest", "--source", log.as_uri(), "--out", str(data),
             "--once", "--quiet", "--flush-rows", "6000"],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        while len(list((data / LOG_DIR).glob("*.json"))) <= before and proc.poll() is None:
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.05))  # somewhere in the next flush: reading, writing or committing
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        commits.append(Table(data).position("log", 0))
    assert commits == sorted(commits) and 0 < commits[0] and commits[-1] < expected // 64, commits
    ingest_once(log, data, flush_rows=6_000)
    assert Table(data).position("log", 0) == expected // 64
    assert_rows_once(data, expected)
    assert main(["verify", "--data", str(data)]) == 0


def test_a_writer_whose_commit_is_refused_reads_on_from_where_the_table_ends(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Another writer commits the partition past where this one's flush starts (it resumed from the
    same place and was quicker): this flush's files go, and reading goes on from the table's end."""
    data = tmp_path / "data"
    stats = _ingest_after_another_writer(tmp_path, LocalLogSource, flush_rows=64 * 40)
    assert "not 0 where the flush starts: another writer committed it" in caplog.text
    assert stats.rows == 64 * 70
    assert_rows_once(data, 64 * 100)
    assert Table(data).position("log", 0) == 100
    assert sorted(read_rows(data)["log_offset"].unique().to_pylist()) == list(range(100))
    committed = {file.path for file in Table(data).files()}
    assert set(data.glob(DATA_GLOB)) == committed  # the refused flush's files went


class _RevokedMidRead(LocalLogSource):
    """A group member's source: its second poll revokes partition 0 (the ingester flushes it there), and,
    as kafka-python's network thread, refuses a seek while the revocation runs."""

    def __init__(self, log_dir: Path, state_dir: Path) -> None:
        super().__init__(log_dir, state_dir)
        self.polls = 0
        self.revoking = False

    def listen(self, assigned: OnAssigned, revoked: OnRevoked, lost: OnLost) -> None:
        self._on_revoked = revoked
        super().listen(assigned, revoked, lost)

    def poll(self, max_records: int, timeout_s: float) -> list[SourceRecord]:
        self.polls += 1
        if self.polls == 1:
            return super().poll(max_records, timeout_s)
        if self.polls == 2:
            self.revoking = True
            try:
                self._on_revoked([0])
            finally:
                self.revoking = False
        return []

    def seek(self, positions: dict[int, int | None]) -> None:
        if self.revoking:
            raise RuntimeError("Cannot block on net.run() from the IO thread itself")
        super().seek(positions)


def test_a_commit_refused_while_the_partition_is_revoked_leaves_it_to_its_next_owner(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The flush of a partition being revoked is refused (another writer committed it first): its files
    go, and the partition is not sought again (its next owner reads on from where the table ends)."""
    data = tmp_path / "data"
    stats = _ingest_after_another_writer(tmp_path, _RevokedMidRead, flush_rows=64 * 1000)  # reads 0-99, flushes none
    assert "not 0 where the flush starts: another writer committed it" in caplog.text
    assert (stats.rows, stats.files) == (0, 0)
    assert Table(data).position("log", 0) == 30
    assert {file.path for file in Table(data).files()} == set(data.glob(DATA_GLOB))  # the refused flush's files went


def _ingest_after_another_writer(tmp_path: Path, source_type: type[LocalLogSource], flush_rows: int) -> IngestStats:
    """An ingester of a log of offsets 0-99 into ``tmp_path/data``, which resumes at offset 0, runs once
    after another writer committed offsets 0-29 there."""
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=64 * 100, seed=2)
    source = source_type(log, data / STATE_DIR)
    ingester = Ingester(source, data, IngestSettings(flush_rows=flush_rows))
    try:
        _commit_offsets_0_to_29_as_another_writer(tmp_path, log, data)
        return ingester.run(once=True)
    finally:
        ingester.close()
        source.close()


def _commit_offsets_0_to_29_as_another_writer(tmp_path: Path, log: Path, data: Path) -> None:
    """Another writer's flush of the log's offsets 0-29, committed to the table at ``data``."""
    ingest_once(log, tmp_path / "other", flush_rows=64 * 30)
    early = [path for path in sorted((tmp_path / "other").glob(DATA_GLOB)) if path.name.startswith("log-0-" + "0" * 20)]
    name = FileName("log", 0, 0, 29, "0123456789ab")
    paths = []
    for path in early:
        target = data / path.parent.relative_to(tmp_path / "other") / name.render("parquet")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
        paths.append(target)
    Table(data).commit(name, [DataFile.local(data, path) for path in paths])


def test_dead_letters_count_with_the_commit_of_their_flush(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=64 * 4, seed=3)
    append_bad_record(log)
    stats = ingest_once(log, data)
    assert (stats.rows, stats.dead_letters) == (64 * 4, 1)
    letters = sorted((data / DEAD_LETTER_DIR).glob("*.jsonl"))
    assert len(letters) == 1
    # A dead-letter file of a flush no commit names (a writer killed before its commit) counts for nothing.
    stray = FileName.parse(letters[0].name)
    assert stray is not None
    stray_name = FileName(stray.source, 0, 5, 9, "0123456789ab").render("jsonl")
    shutil.copy(letters[0], data / DEAD_LETTER_DIR / stray_name)
    assert main(["verify", "--data", str(data)]) == 3
    out = capsys.readouterr().out
    assert "set aside: log partition 0: 1 record(s), offsets 4-4" in out
    assert "log             0             0            4        1     0         0" in out  # one flush, no gap


def test_a_table_resumes_from_its_log_whatever_the_offsets_hint_says(tmp_path: Path) -> None:
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=64 * 50, seed=6)
    ingest_once(log, data, flush_rows=64 * 10)
    write_load(log, rows=64 * 20, seed=7, engine_prefix="more")
    (data / STATE_DIR / "log.offsets.json").unlink()  # the hint lost: the table's log says where
    assert ingest_once(log, data, flush_rows=64 * 10).rows == 64 * 20
    assert_rows_once(data, 64 * 70)
