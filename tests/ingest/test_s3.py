"""Ingesting into a table on S3 (SeaweedFS started by the suite): the same numbers as on disk,
exactly once under SIGKILL and a server restart, a forged object neither read nor mistaken for a
stored flush, and a clear error with nothing committed for wrong credentials, a missing bucket or
an unreachable endpoint."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path, PurePosixPath

import pyarrow.parquet as pq
import pytest

from devtools.s3_server import SeaweedS3
from specmetrics.cli import main
from specmetrics.queries.verify import verify_table
from specmetrics.storage.layout import FileName
from specmetrics.storage.location import S3Location
from specmetrics.storage.parquet import FileStats
from specmetrics.storage.table import DataFile, Table, is_table
from specmetrics.transport.log.directory import ID_FILE
from tests.support.ingest import append_bad_record, ingest_once, ingest_to_s3, rows_once
from tests.support.loadgen import write_load
from tests.support.readers import numbers, report

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specmetrics.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300, check=False)


def test_a_table_on_s3_holds_what_a_local_one_holds(s3_url: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "log"
    write_load(log, rows=30_000, seed=41, engines=2)
    append_bad_record(log)
    assert ingest_to_s3(log, s3_url, tmp_path / "state", flush_rows=7_000) == 30_016
    ingest_once(log, tmp_path / "local", flush_rows=7_000)
    assert numbers(s3_url) == numbers(tmp_path / "local")  # type: ignore[arg-type]
    checked = verify_table(S3Location.parse(s3_url))
    assert checked.clean and [(p.first, p.last) for p in checked.partitions] == [(0, 469)]
    assert [(g.records, g.first) for g in checked.set_aside] == [(1, 469)]
    assert main(["verify", "--data", s3_url]) == 3
    assert main(["sql", "--data", s3_url, "SELECT count(*) AS n FROM request_steps"]) == 0
    assert "30016" in capsys.readouterr().out.replace(",", "")
    assert report(s3_url, tmp_path / "s3-report") == report(tmp_path / "local", tmp_path / "local-report")  # type: ignore[arg-type]


def test_a_forged_object_is_not_read_and_no_real_row_is_skipped(s3_url: str, tmp_path: Path) -> None:
    log, location = tmp_path / "log", S3Location.parse(s3_url)
    write_load(log, rows=6_400, seed=42)
    ingest_to_s3(log, s3_url, tmp_path / "state", flush_rows=3_200)
    first = Table(location).files()[0]
    forged = first.relative.rsplit("/", 1)[0] + "/" + FileName("log", 0, 100, 149).render("parquet")
    pq.write_table(Table(location).read(first), location.key(forged), filesystem=location.filesystem())
    assert rows_once(s3_url) == 6_400
    assert verify_table(location).uncommitted == [forged]
    write_load(log, rows=6_400, seed=43, engine_prefix="more")
    assert ingest_to_s3(log, s3_url, tmp_path / "state", flush_rows=3_200) == 6_400
    assert rows_once(s3_url) == 12_800
    assert Table(location).position("log", 0) == 200


def test_two_hosts_whose_logs_share_a_folder_name_each_keep_their_offsets(s3_url: str, tmp_path: Path) -> None:
    first, second = tmp_path / "host-a" / "log", tmp_path / "host-b" / "log"
    write_load(first, rows=6_400, seed=45)
    write_load(second, rows=9_600, seed=46, engine_prefix="b")
    assert ingest_to_s3(first, s3_url, tmp_path / "host-a" / "state", flush_rows=3_200) == 6_400
    assert ingest_to_s3(second, s3_url, tmp_path / "host-b" / "state", flush_rows=3_200) == 9_600
    assert ingest_to_s3(first, s3_url, tmp_path / "host-a" / "state", flush_rows=3_200) == 0
    assert rows_once(s3_url) == 16_000
    table = Table(S3Location.parse(s3_url))
    assert table.position("log", 0) == 100
    assert table.position(table.claim("log", f"local log {(second / ID_FILE).read_text().strip()}"), 0) == 150
    assert verify_table(S3Location.parse(s3_url)).clean


def test_verify_finds_rows_a_table_on_s3_counts_twice(s3_url: str, tmp_path: Path) -> None:
    log, location = tmp_path / "log", S3Location.parse(s3_url)
    write_load(log, rows=6_400, seed=47)
    ingest_to_s3(log, s3_url, tmp_path / "state", flush_rows=3_200)
    table = Table(location)
    first = table.files()[0]
    name = FileName.parse(PurePosixPath(first.relative).name)
    assert name is not None
    again = FileName(name.source, name.partition, name.start, name.end, "0" * 12)
    copy = f"{PurePosixPath(first.relative).parent}/{again.render('parquet')}"
    location.filesystem().copy_file(location.key(first.relative), location.key(copy))
    table.replace([], [DataFile(copy, first.size, FileStats(3_200))])
    checked = verify_table(location)
    assert checked.rows_twice == table.rows(first) == 3_200 and not checked.clean
    assert main(["verify", "--data", s3_url]) == 1


def test_sigkill_during_uploads_and_commits_loses_and_duplicates_nothing(s3_url: str, tmp_path: Path) -> None:
    log, location = tmp_path / "log", S3Location.parse(s3_url)
    expected = sum(t.rows for t in write_load(log, rows=120_000, seed=44, engines=2).values())
    rng = random.Random(44)
    positions = []
    for _ in range(10):
        before = Table(location).position("log", 0) if is_table(location) else None
        proc = subprocess.Popen(
            [sys.executable, "-m", "specmetrics.cli", "ingest", "--source", log.as_uri(), "--out", s3_url,
             "--state-dir", str(tmp_path / "state"), "--once", "--quiet", "--flush-rows", "3000"],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline and \
                (not is_table(location) or Table(location).position("log", 0) == before):
            time.sleep(0.02)
        time.sleep(rng.uniform(0, 0.1))  # somewhere in a later flush: reading, uploading or committing
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        positions.append(Table(location).position("log", 0))
    assert positions == sorted(positions) and positions[-1] < expected // 64, positions
    assert ingest_to_s3(log, s3_url, tmp_path / "state", flush_rows=3_000) > 0
    assert rows_once(s3_url) == expected
    assert verify_table(location).clean


def test_an_s3_server_restarted_mid_ingest_loses_and_duplicates_nothing(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "log"
    expected = sum(t.rows for t in write_load(log, rows=150_000, seed=45, engines=2).values())
    with SeaweedS3(tmp_path / "seaweed") as server:
        server.create_bucket("restarted")
        for name, value in server.environment().items():
            monkeypatch.setenv(name, value)
        url = "s3://restarted/data"
        proc = subprocess.Popen(
            [sys.executable, "-m", "specmetrics.cli", "ingest", "--source", log.as_uri(), "--out", url,
             "--state-dir", str(tmp_path / "state"), "--once", "--quiet", "--flush-rows", "2000"],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        location = S3Location.parse(url)
        deadline = time.monotonic() + 60
        while not is_table(location) or (Table(location).position("log", 0) or 0) < 200:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        server.stop(graceful=True)
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 2, stderr  # a clear error, not a silent exit 0
        assert "specmetrics ingest: error:" in stderr and "secret" not in stderr
        server.start()
        try:
            assert ingest_to_s3(log, url, tmp_path / "state", flush_rows=2_000) > 0
            assert rows_once(url) == expected
            assert verify_table(location).clean
        except (AssertionError, OSError) as exc:  # what the store said about it, for a rare failure's cause
            raise AssertionError(f"after the restart: {exc}\nSeaweedFS's log:\n{server.log_tail()}") from exc


@pytest.mark.parametrize("fault", ["wrong secret", "missing bucket", "unreachable endpoint"])
def test_a_bad_store_is_one_clear_error_and_nothing_is_committed(
        s3_url: str, s3_server: SeaweedS3, tmp_path: Path, fault: str, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "log"
    write_load(log, rows=640, seed=46)
    writer = S3Location.parse(s3_url)  # with the writer's settings, as the fixture set them
    url = s3_url
    if fault == "wrong secret":
        monkeypatch.setenv("SPECMETRICS_S3_SECRET_ACCESS_KEY", "not-the-secret-at-all")
    elif fault == "missing bucket":
        url = f"s3://missing-{uuid.uuid4().hex[:8]}/data"
    else:
        monkeypatch.setenv("SPECMETRICS_S3_ENDPOINT", "http://127.0.0.1:9")
    done = cli("ingest", "--source", log.as_uri(), "--out", url, "--state-dir", str(tmp_path / "state"), "--once",
               "--quiet")
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("specmetrics ingest: error: "), done.stderr
    assert "not-the-secret-at-all" not in done.stderr and "writer-secret" not in done.stderr
    assert not is_table(writer)


def test_two_ingesters_of_one_kafka_group_share_one_table_on_s3(s3_url: str, kafka_url: str, tmp_path: Path) -> None:
    truth = tmp_path / "truth.json"
    assert main(["loadgen", "--sink", kafka_url, "--rows", "60000", "--engines", "6", "--seed", "47",
                 "--truth", str(truth)]) == 0
    expected = sum(sum(engine["request_steps"].values()) for engine in json.loads(truth.read_text()).values())
    procs = [subprocess.Popen(
        [sys.executable, "-m", "specmetrics.cli", "ingest", "--source", kafka_url, "--out", s3_url, "--state-dir",
         str(tmp_path / f"state-{i}"), "--once", "--quiet", "--flush-rows", "3000"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True) for i in range(2)]
    outputs = [proc.communicate(timeout=180) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    rows_by_ingester = [int(out.split()[1].replace(",", "")) for out, _ in outputs]
    assert min(rows_by_ingester) > 0, rows_by_ingester  # both committed to the one table
    assert rows_once(s3_url) == sum(rows_by_ingester) == expected
    assert verify_table(S3Location.parse(s3_url)).clean
