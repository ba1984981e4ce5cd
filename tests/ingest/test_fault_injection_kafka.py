"""Faults a Kafka ingester meets, injected for real: group offsets lost, a broker restarted
empty, tombstones, an unreachable broker, SIGKILL. After each, either every good record is
stored exactly once and every bad one is a dead letter, or the command exits non-zero naming
what is missing; never exit code 0 with rows missing, and never a committed file removed or
rewritten (more of a table's faults: test_kafka.py, test_table.py)."""

from __future__ import annotations

import base64
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

from devtools.kafka_broker import TansuBroker
from devtools.ports import free_port
from specmetrics.cli import main
from specmetrics.schemas.wire import step_event_to_wire
from specmetrics.storage.layout import DEAD_LETTER_DIR
from specmetrics.storage.table import Table, is_table
from specmetrics.transport.kafka import KafkaAddress
from tests.support.events import T0, step_event
from tests.support.ingest import read_rows

ROOT = Path(__file__).resolve().parents[2]


def identity(path: Path) -> tuple[int, int]:
    """Inode and modification time: a file written again (a new file renamed onto the name) has
    another, even where the file system reuses the inode number it just freed."""
    stat = path.stat()
    return stat.st_ino, stat.st_mtime_ns
PARTITIONS = 3
ROWS_PER_STEP = 4  # outcomes of tests.conftest.step_event


def good(i: int) -> bytes:
    """Step ``i``: 20 minutes after step ``i - 1``, so a flush of a few steps spans several hours."""
    return step_event_to_wire(step_event(event_id=f"good-{i}", step_index=i, event_time=T0 + timedelta(minutes=20 * i)))


def create_topic(bootstrap: str, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=[bootstrap])
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    except TopicAlreadyExistsError:
        pass
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, values: list[bytes | None], first: int = 0) -> None:
    """Message ``first + i`` to partition ``(first + i) % PARTITIONS``, in order: the same calls
    on an empty topic give the same records at the same offsets."""
    producer = KafkaProducer(bootstrap_servers=[bootstrap], acks="all", enable_idempotence=False)
    for i, value in enumerate(values, start=first):
        producer.send(topic, key=b"tombstone" if value is None else None, value=value, partition=i % PARTITIONS)
    producer.flush()
    producer.close()


def ingest(url: str, out: Path, *extra: str) -> int:
    return main(["ingest", "--source", url, "--out", str(out), "--once", "--quiet", *extra])


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "specmetrics.cli", *args], cwd=ROOT, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def stored_files(out: Path) -> dict[str, tuple[int, int]]:
    """Every data file the table's log names, and its dead-letter file, by path, with its identity."""
    found = {}
    for file in Table(out).files():
        letters = out / DEAD_LETTER_DIR / file.path.with_suffix(".jsonl").name
        for path in (file.path, letters) if letters.exists() else (file.path,):
            found[str(path.relative_to(out))] = identity(path)
    return found


def set_aside_offsets(out: Path) -> list[int]:
    """The offsets of the dead letters of committed flushes (a killed writer's letters count for nothing)."""
    return [json.loads(line)["offset"] for path in stored_files(out) if path.endswith(".jsonl")
            for line in (out / path).read_text().splitlines()]


def assert_stored_once(out: Path, steps: int, set_aside: bool = False) -> None:
    """Every step stored once; ``verify`` says clean (exit code 3: clean, with dead letters set aside)."""
    table = read_rows(out)
    keys = pc.binary_join_element_wise(table["event_id"].cast("string"), table["request_id"], "|")
    assert table.num_rows == steps * ROWS_PER_STEP
    assert pc.count_distinct(keys).as_py() == steps * ROWS_PER_STEP
    assert main(["verify", "--data", str(out)]) == (3 if set_aside else 0)


@pytest.fixture
def fast_group(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECMETRICS_KAFKA_SESSION_TIMEOUT_MS", "2000")  # joins take half of it on Tansu
    monkeypatch.setenv("SPECMETRICS_KAFKA_HEARTBEAT_INTERVAL_MS", "500")


@pytest.mark.usefixtures("fast_group")
def test_deleted_group_offsets_keep_every_stored_file(kafka_url: str, tmp_path: Path) -> None:
    address = KafkaAddress.parse(kafka_url)
    bootstrap, out = address.bootstrap_servers[0], tmp_path / "out"
    create_topic(bootstrap, address.topic)
    produce(bootstrap, address.topic, [good(i) for i in range(30)])
    assert ingest(kafka_url, out, "--flush-rows", "20") == 0
    before = stored_files(out)
    admin = KafkaAdminClient(bootstrap_servers=[bootstrap])
    assert admin.delete_groups([os.environ["SPECMETRICS_INGEST_GROUP"]])  # as offsets.retention.minutes would
    admin.close()
    produce(bootstrap, address.topic, [good(i) for i in range(30, 45)], first=30)
    assert ingest(kafka_url, out, "--flush-rows", "20") == 0
    after = stored_files(out)
    assert {path: after.get(path) for path in before} == before  # not one file removed or written again
    assert_stored_once(out, 45)


@pytest.mark.usefixtures("fast_group")
def test_a_broker_that_lost_its_records_is_refused_and_no_file_is_removed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with TansuBroker() as broker:
        url = broker.url("lost")
        create_topic(broker.bootstrap, "lost")
        produce(broker.bootstrap, "lost", [good(i) for i in range(30)])
        assert ingest(url, out, "--flush-rows", "20") == 0
        before = stored_files(out)
        broker.stop()  # memory storage: records, topics and group offsets are gone
        broker.start()
        create_topic(broker.bootstrap, "lost")
        produce(broker.bootstrap, "lost", [good(i) for i in range(30, 33)], first=30)
        proc = cli("ingest", "--source", url, "--out", str(out), "--once", "--quiet")
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 2, stderr
    assert "Traceback" not in stderr and stderr.splitlines()[-1].startswith("specmetrics ingest: error: "), stderr
    # the offsets of the files, not a read position past them (it said "the stored files end at offset 10")
    assert re.search(r"partition ([0-2]) of topic lost ends at offset 1, but it was read to offset 9: the topic "
                     r"was recreated or the broker lost its data; the files of partition \1 reach offset 9\. "
                     r"Nothing was removed", stderr), stderr
    assert stored_files(out) == before
    assert_stored_once(out, 30)


@pytest.mark.usefixtures("fast_group")
def test_tombstones_are_dead_letters_and_the_records_around_them_are_stored(kafka_url: str, tmp_path: Path) -> None:
    address = KafkaAddress.parse(kafka_url)
    bootstrap, out = address.bootstrap_servers[0], tmp_path / "out"
    create_topic(bootstrap, address.topic)
    values = [good(0), good(1), good(2), None, None, None, good(6), good(7), good(8)]
    produce(bootstrap, address.topic, values)
    assert ingest(kafka_url, out) == 0
    assert sorted(set(read_rows(out)["event_id"].to_pylist())) == [f"good-{i}" for i in (0, 1, 2, 6, 7, 8)]
    letters = [json.loads(line) for path in sorted((out / DEAD_LETTER_DIR).glob("*.jsonl"))
               for line in path.read_text().splitlines()]
    assert sorted((letter["partition"], letter["offset"]) for letter in letters) == [(0, 1), (1, 1), (2, 1)]
    assert {letter["reason"] for letter in letters} == {"a Kafka tombstone (a message without a value), not a step "
                                                        "message"}
    assert {base64.b64decode(letter["payload_base64"]) for letter in letters} == {b""}
    assert_stored_once(out, 6, set_aside=True)


def test_an_unreachable_broker_is_one_line_and_exit_code_2_without_credentials(tmp_path: Path) -> None:
    proc = cli("ingest", "--source", f"kafka://127.0.0.1:{free_port()}/steps", "--out", str(tmp_path / "out"),
               "--once", "--quiet", env={"SPECMETRICS_KAFKA_REQUEST_TIMEOUT_S": "1",
                                         "SPECMETRICS_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
                                         "SPECMETRICS_KAFKA_SASL_MECHANISM": "PLAIN",
                                         "SPECMETRICS_KAFKA_SASL_USERNAME": "ingest",
                                         "SPECMETRICS_KAFKA_SASL_PASSWORD": "hunter2"})
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 2, stderr
    assert stderr.count("\n") == 1 and "Traceback" not in stderr, stderr
    assert stderr.startswith("specmetrics ingest: error: Kafka at 127.0.0.1:"), stderr
    assert "(topic steps) failed: " in stderr and "hunter2" not in stderr + stdout


@pytest.mark.usefixtures("fast_group")
def test_sigkill_mid_flush_then_lost_offsets_keep_committed_flushes_and_write_the_cut_one_again(
        kafka_url: str, tmp_path: Path) -> None:
    address = KafkaAddress.parse(kafka_url)
    bootstrap, out = address.bootstrap_servers[0], tmp_path / "out"
    create_topic(bootstrap, address.topic)
    values = [b"\x00not msgpack" if i % 7 == 6 else good(i) for i in range(300)]  # dead letters in most flushes
    produce(bootstrap, address.topic, values)
    rng = random.Random(3)
    for _ in range(2):
        before = len(stored_files(out)) if is_table(out) else 0
        proc = cli("ingest", "--source", kafka_url, "--out", str(out), "--once", "--quiet",
                   "--flush-rows", "24", env={"SPECMETRICS_INGEST_FLUSH_EVENT_TIME_S": "86400"})
        deadline = time.monotonic() + 60
        while (not is_table(out) or len(stored_files(out)) < before + 10) and proc.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.1))  # somewhere in a later flush: between its files, or before its commit
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    complete = stored_files(out)
    assert complete
    admin = KafkaAdminClient(bootstrap_servers=[bootstrap])
    admin.delete_groups([os.environ["SPECMETRICS_INGEST_GROUP"]])
    admin.close()
    assert ingest(kafka_url, out, "--flush-rows", "24") == 0
    after = stored_files(out)
    assert {path: after.get(path) for path in complete} == complete
    assert len(after) > len(complete)  # the kills hit the middle of the stream
    assert_stored_once(out, sum(not v.startswith(b"\x00") for v in values), set_aside=True)
    letters = set_aside_offsets(out)
    assert len(letters) == len(set(letters)) == sum(v.startswith(b"\x00") for v in values)


def test_following_survives_a_broker_restart_and_stores_every_record_once(tmp_path: Path) -> None:
    """The broker is killed while the ingester has records buffered, and comes back. Tansu keeps
    records in memory only, so the test writes the same records at the same offsets again on
    the new broker, as a Kafka broker with disks would have kept them; the group's offsets are
    gone, as after an expiry."""
    out = tmp_path / "out"
    with TansuBroker() as broker:
        url = broker.url("follow")
        create_topic(broker.bootstrap, "follow")
        produce(broker.bootstrap, "follow", [good(i) for i in range(30)])
        proc = cli("ingest", "--source", url, "--out", str(out), "--quiet",
                   env={"SPECMETRICS_INGEST_FLUSH_IDLE_S": "1.5", "SPECMETRICS_KAFKA_REQUEST_TIMEOUT_S": "2"})
        try:
            wait_for_rows(out, 30 * ROWS_PER_STEP)
            produce(broker.bootstrap, "follow", [good(i) for i in range(30, 45)], first=30)
            time.sleep(0.5)  # read, not flushed yet (the idle flush waits 1.5 s)
            broker.stop()
            time.sleep(3.0)  # the idle flush writes its files, and its commit fails
            broker.start()
            create_topic(broker.bootstrap, "follow")
            produce(broker.bootstrap, "follow", [good(i) for i in range(45)])
            produce(broker.bootstrap, "follow", [good(i) for i in range(45, 60)], first=45)
            wait_for_rows(out, 60 * ROWS_PER_STEP)
        finally:
            proc.send_signal(signal.SIGTERM)
            _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stderr and "trying again in" in stderr, stderr[-3000:]
    assert_stored_once(out, 60)


def wait_for_rows(out: Path, rows: int, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if is_table(out) and sum(pq.read_metadata(f.path).num_rows for f in Table(out).files()) >= rows:
            return
        time.sleep(0.2)
    raise AssertionError(f"{rows} rows not stored within {timeout_s} s")
