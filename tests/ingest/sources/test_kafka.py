"""Kafka → Parquet against a real broker: exactly once under kills, rebalances, bad records
and a broker restart."""

from __future__ import annotations

import base64
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgpack
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from devtools.kafka_broker import TansuBroker
from specmetrics.cli import main
from specmetrics.emitter.sinks import open_sink
from specmetrics.ingest.batch import DUPLICATE_STEP
from specmetrics.ingest.sources.kafka import KafkaSource
from specmetrics.schemas.wire import decode_step, step_event_to_wire
from specmetrics.storage.layout import DATA_GLOB, DEAD_LETTER_DIR
from specmetrics.storage.table import Table
from specmetrics.transport.kafka import KafkaAddress
from tests.support.events import step_event
from tests.support.ingest import bad_outcomes_message, read_rows

ROOT = Path(__file__).resolve().parents[3]


def cli(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "specmetrics.cli", *args], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


Truth = dict[str, dict[str, Any]]


def loadgen(url: str, truth: Path, *extra: str) -> Truth:
    assert main(["loadgen", "--sink", url, "--truth", str(truth), *extra]) == 0
    loaded: Truth = json.loads(truth.read_text())
    return loaded


def total_rows(truth: Truth) -> int:
    return sum(sum(t["request_steps"].values()) for t in truth.values())


def ingest(url: str, out: Path, *extra: str) -> int:
    return main(["ingest", "--source", url, "--out", str(out), "--once", "--quiet", *extra])


def wait_for_records(broker: TansuBroker, topic: str, timeout_s: float = 120.0) -> None:
    """Until ``topic`` holds a record."""
    consumer = KafkaConsumer(bootstrap_servers=[broker.bootstrap], enable_auto_commit=False,
                             allow_auto_create_topics=False)
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
            if partitions and any(consumer.end_offsets(partitions).values()):
                return
            time.sleep(0.1)
    finally:
        consumer.close()
    raise AssertionError(f"no record reached {topic} within {timeout_s:.0f} s")


def assert_exactly_once(out: Path, truth: Truth) -> None:
    table = read_rows(out)
    keys = pc.binary_join_element_wise(table["event_id"].cast("string"), table["request_id"], "|")
    expected = total_rows(truth)
    assert table.num_rows == expected
    assert pc.count_distinct(keys).as_py() == expected
    assert main(["verify", "--data", str(out)]) == 0


def test_produce_ingest_verify(kafka_url: str, tmp_path: Path) -> None:
    truth = loadgen(kafka_url, tmp_path / "truth.json", "--rows", "50000", "--engines", "3", "--seed", "3",
                    "--prompt-len", "32,600", "--drafter-max-len", "1100")
    assert ingest(kafka_url, tmp_path / "out") == 0
    assert_exactly_once(tmp_path / "out", truth)
    kinds = read_rows(tmp_path / "out").group_by("kind").aggregate([("kind", "count")]).to_pylist()
    counts = {row["kind"]: row["kind_count"] for row in kinds}
    assert counts == {kind: sum(t["request_steps"].get(kind, 0) for t in truth.values()) for kind in counts}
    assert set(counts) == {"drafted", "skipped_for_length", "grammar_invalid", "k_zero"}
    for path in (tmp_path / "out").glob(DATA_GLOB):  # one row group per flush, never a row group per message
        assert pq.ParquetFile(path).metadata.num_row_groups == 1
    assert ingest(kafka_url, tmp_path / "out") == 0  # a second run commits nothing new and writes nothing
    assert_exactly_once(tmp_path / "out", truth)


def test_an_output_tree_belongs_to_one_group(kafka_url: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert ingest(kafka_url, tmp_path / "out", "--group", "first") == 0
    assert ingest(kafka_url, tmp_path / "out", "--group", "second") == 2
    assert "holds the output of consumer group 'first', not 'second'" in capsys.readouterr().err


def test_one_topic_name_on_two_clusters_keeps_two_sets_of_offsets_in_one_table(kafka_url: str, tmp_path: Path
                                                                               ) -> None:
    """Each ingested from its own host (state folder): the table tells the clusters apart by their ids."""
    topic = KafkaAddress.parse(kafka_url).topic
    with TansuBroker(cluster_id="other_cluster") as other:
        first = loadgen(kafka_url, tmp_path / "first.json", "--rows", "6400", "--seed", "5")
        second = loadgen(other.url(topic), tmp_path / "second.json", "--rows", "9600", "--seed", "6",
                         "--engine-prefix", "other")
        assert ingest(kafka_url, tmp_path / "out", "--state-dir", str(tmp_path / "host-a")) == 0
        assert ingest(other.url(topic), tmp_path / "out", "--state-dir", str(tmp_path / "host-b")) == 0
        assert_exactly_once(tmp_path / "out", {**first, **second})
    table = Table(tmp_path / "out")
    name = KafkaAddress.parse(kafka_url).file_prefix
    assert table.claim(name, f"kafka topic {topic} of cluster tansu_cluster") == name
    other_name = table.claim(name, f"kafka topic {topic} of cluster other_cluster")
    assert other_name.startswith(f"{name}_") and table.position(other_name, 0) is not None


def test_sigkill_at_random_moments_in_ten_runs_loses_and_duplicates_nothing(
        kafka_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECMETRICS_KAFKA_SESSION_TIMEOUT_MS", "2000")  # a killed member leaves the group sooner
    monkeypatch.setenv("SPECMETRICS_KAFKA_HEARTBEAT_INTERVAL_MS", "500")
    truth = loadgen(kafka_url, tmp_path / "truth.json", "--rows", "200000", "--engines", "3", "--seed", "5")
    out = tmp_path / "out"
    rng = random.Random(5)
    files_at_kill = []
    for _ in range(10):
        before = len(list(out.glob(DATA_GLOB)))
        proc = cli("ingest", "--source", kafka_url, "--out", str(out), "--once", "--quiet", "--flush-rows", "2000")
        deadline = time.monotonic() + 60
        while len(list(out.glob(DATA_GLOB))) == before and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.05))  # somewhere in a later flush: reading, writing, renaming or committing
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        files_at_kill.append(len(list(out.glob(DATA_GLOB))))
    assert files_at_kill[-1] < 100, files_at_kill  # every kill hit the middle of the stream (~100 flushes)
    assert ingest(kafka_url, out, "--flush-rows", "2000") == 0
    assert_exactly_once(out, truth)


def test_two_ingesters_in_one_group_split_the_partitions(kafka_url: str, tmp_path: Path) -> None:
    truth = loadgen(kafka_url, tmp_path / "truth.json", "--rows", "100000", "--engines", "6", "--seed", "7")
    out = tmp_path / "out"
    procs = [cli("ingest", "--source", kafka_url, "--out", str(out), "--once", "--quiet", "--flush-rows", "3000")
             for _ in range(2)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    rows_by_ingester = [int(o.decode().split()[1].replace(",", "")) for o, _ in outputs]
    assert sum(rows_by_ingester) == total_rows(truth)
    assert min(rows_by_ingester) > 0, rows_by_ingester  # both took part
    assert_exactly_once(out, truth)


def test_bad_records_go_to_the_dead_letter_topic_and_good_ones_are_ingested(kafka_url: str, tmp_path: Path) -> None:
    address = KafkaAddress.parse(kafka_url)
    wrong_major = msgpack.unpackb(step_event_to_wire(step_event(event_id="major")))
    wrong_major[0] = "2.0"
    bad = [b"\x00not msgpack", msgpack.packb(wrong_major), bad_outcomes_message("unknown kind")]
    good = [step_event_to_wire(step_event(event_id=f"good-{i}")) for i in range(3)]
    producer = KafkaProducer(bootstrap_servers=list(address.bootstrap_servers))
    main(["ingest", "--source", kafka_url, "--out", str(tmp_path / "warmup"), "--once", "--quiet",
          "--group", "warmup"])  # creates the topic
    for message in [good[0], bad[0], good[1], bad[1], bad[2], good[2]]:
        producer.send(address.topic, key=b"one-engine", value=message)
    producer.flush()
    producer.close()
    assert ingest(kafka_url, tmp_path / "out") == 0
    assert sorted(set(read_rows(tmp_path / "out")["event_id"].to_pylist())) == ["good-0", "good-1", "good-2"]
    letters = [json.loads(line) for f in sorted((tmp_path / "out" / DEAD_LETTER_DIR).glob("*.jsonl"))
               for line in f.read_text().splitlines()]
    assert [base64.b64decode(letter["payload_base64"]) for letter in letters] == bad
    consumer = KafkaConsumer(bootstrap_servers=list(address.bootstrap_servers), enable_auto_commit=False)
    tp = TopicPartition(f"{address.topic}.dead-letter", 0)
    consumer.assign([TopicPartition(tp.topic, p) for p in consumer.partitions_for_topic(tp.topic) or ()])
    consumer.seek_to_beginning()
    dead = []
    deadline = time.monotonic() + 20
    while len(dead) < 3 and time.monotonic() < deadline:
        dead += [r for records in consumer.poll(500).values() for r in records]
    consumer.close()
    assert sorted(r.value for r in dead) == sorted(bad)
    reasons = {r.value: dict(r.headers)["reason"].decode() for r in dead}
    assert "not a msgpack step message" in reasons[bad[0]]
    assert "major version 2" in reasons[bad[1]]
    assert "unknown outcome kind code" in reasons[bad[2]]
    # dead-lettered offsets count as stored: clean, with records set aside (exit code 3)
    assert main(["verify", "--data", str(tmp_path / "out")]) == 3


def test_steps_a_producer_sent_twice_are_stored_and_counted_once(kafka_url: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The plugin's Kafka sink sends steps, then sends some again, as its spool replays steps whose
    acknowledgement timed out (the broker had stored them): each step is stored once, the copies are
    dead letters with the reason, and ``verify`` says records were set aside."""
    assert ingest(kafka_url, tmp_path / "warmup", "--group", "warmup") == 0  # creates the topic
    steps = [step_event_to_wire(step_event(event_id=f"resent-{i}")) for i in range(6)]
    sink = open_sink(kafka_url, "resender")
    sink.send(b"one-engine", steps[:4])
    sink.flush()
    sink.send(b"one-engine", [*steps[2:4], *steps[4:]])  # 2 and 3 again, then the rest
    sink.close()
    assert ingest(kafka_url, tmp_path / "out") == 0
    table = read_rows(tmp_path / "out")
    assert table.num_rows == 6 * 4 and len(set(table["event_id"].to_pylist())) == 6
    letters = [json.loads(line) for f in sorted((tmp_path / "out" / DEAD_LETTER_DIR).glob("*.jsonl"))
               for line in f.read_text().splitlines()]
    assert [base64.b64decode(letter["payload_base64"]) for letter in letters] == steps[2:4]
    assert {letter["reason"] for letter in letters} == {DUPLICATE_STEP}
    assert {letter["partition"] for letter in letters} == {pc.min(table["log_partition"]).as_py()}
    capsys.readouterr()
    assert main(["verify", "--data", str(tmp_path / "out")]) == 3
    assert "2 record(s)" in capsys.readouterr().out


def test_steps_resent_after_a_broker_pause_are_stored_and_counted_once(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The chaos soak's case, literally: a realtime load generator produces while its broker is
    paused (SIGSTOP) for longer than the producer's delivery timeout. The requests in flight are
    stored when the broker resumes, but their acknowledgements timed out, so the sink's spool sends
    them again. Every step is stored once, each copy is a dead letter for a duplicate, and ``verify``
    says records were set aside (exit 3)."""
    with TansuBroker() as broker:
        url = broker.url("paused")
        emitter = subprocess.Popen(
            [sys.executable, "-m", "specmetrics.cli", "loadgen", "--sink", url, "--rows", "24000", "--engines", "2",
             "--realtime", "--step-ms", "8", "--truth", str(tmp_path / "truth.json")], cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), "SPECMETRICS_KAFKA_REQUEST_TIMEOUT_S": "1"},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_for_records(broker, "paused")  # producing (paused earlier, it may never reach the broker)
        broker.pause()
        time.sleep(4.0)  # past the delivery timeout (twice the request timeout)
        broker.resume()
        _, stderr = emitter.communicate(timeout=180)
        assert emitter.returncode == 0, stderr.decode()[-2000:]
        assert ingest(url, tmp_path / "out") == 0
    truth: Truth = json.loads((tmp_path / "truth.json").read_text())
    table = read_rows(tmp_path / "out")
    keys = pc.binary_join_element_wise(table["event_id"].cast("string"), table["request_id"], "|")
    assert table.num_rows == pc.count_distinct(keys).as_py() == total_rows(truth)
    letters = [json.loads(line) for f in sorted((tmp_path / "out" / DEAD_LETTER_DIR).glob("*.jsonl"))
               for line in f.read_text().splitlines()]
    assert letters and {letter["reason"] for letter in letters} == {DUPLICATE_STEP}
    stored = set(table["event_id"].to_pylist())
    resent = {decode_step(base64.b64decode(letter["payload_base64"])).event_id for letter in letters}
    assert resent <= stored
    capsys.readouterr()
    assert main(["verify", "--data", str(tmp_path / "out")]) == 3
    assert f"{len(letters)} record(s)" in capsys.readouterr().out


def test_static_membership_reaches_the_consumer(kafka_url: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """SPECMETRICS_KAFKA_GROUP_INSTANCE_ID is the consumer's group instance id (static membership,
    measured by benchmarks/bench_churn.py); unset, membership is dynamic."""
    monkeypatch.setenv("SPECMETRICS_KAFKA_GROUP_INSTANCE_ID", "ingest-7")
    source = KafkaSource(KafkaAddress.parse(kafka_url), "static", tmp_path / "state")
    try:
        assert source._consumer.config["group_instance_id"] == "ingest-7"
    finally:
        source.close()
    monkeypatch.delenv("SPECMETRICS_KAFKA_GROUP_INSTANCE_ID")
    source = KafkaSource(KafkaAddress.parse(kafka_url), "dynamic", tmp_path / "other")
    try:
        assert source._consumer.config["group_instance_id"] is None
    finally:
        source.close()


def test_sigterm_flushes_and_commits(kafka_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    truth = loadgen(kafka_url, tmp_path / "truth.json", "--rows", "20000", "--seed", "9")
    out = tmp_path / "out"
    monkeypatch.setenv("SPECMETRICS_INGEST_FLUSH_IDLE_S", "60")  # only SIGTERM can flush within this test
    monkeypatch.setenv("SPECMETRICS_INGEST_LOG_INTERVAL_S", "0.5")
    proc = cli("-v", "ingest", "--source", kafka_url, "--out", str(out), "--quiet")  # follows the topic
    assert proc.stderr is not None
    for line in proc.stderr:
        if b"ingest.sources.kafka: assigned partitions" in line:
            break
    time.sleep(2.0)  # reads the 313 messages
    assert not list(out.glob(DATA_GLOB))
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert "ingested 20,032 request-steps" in stdout.decode()
    assert b" rows/s, lag 0 record(s)" in stderr  # progress of a long-running ingester is logged
    assert_exactly_once(out, truth)
    assert ingest(kafka_url, out) == 0  # committed: nothing is read twice
    assert_exactly_once(out, truth)


def test_a_broker_restart_while_the_emitter_produces_loses_no_event(tmp_path: Path) -> None:
    """Tansu keeps records in memory only, so a restart empties it (real Kafka keeps them on
    disk). To count end to end anyway, the emitter is paused while a first ingester drains the
    first broker; the broker is killed, the emitter resumes into the outage (spooling, with
    requests in flight), the broker comes back empty and a second ingester reads the rest."""
    broker = TansuBroker().start()
    url = broker.url("live")
    try:
        emitter = cli("loadgen", "--sink", url, "--rows", "64000", "--engines", "2", "--realtime", "--step-ms", "8",
                      "--truth", str(tmp_path / "truth.json"))
        time.sleep(2.5)
        emitter.send_signal(signal.SIGSTOP)
        time.sleep(0.5)
        assert ingest(url, tmp_path / "first") == 0
        broker.stop()
        emitter.send_signal(signal.SIGCONT)
        time.sleep(2.0)  # the emitter produces into the outage
        broker.start()
        _, stderr = emitter.communicate(timeout=120)
        assert emitter.returncode == 0, stderr.decode()[-2000:]
        assert ingest(url, tmp_path / "second") == 0
    finally:
        broker.stop()
    truth = json.loads((tmp_path / "truth.json").read_text())
    first, second = read_rows(tmp_path / "first"), read_rows(tmp_path / "second")
    assert first.num_rows and second.num_rows  # the restart happened mid-stream
    events = set(first["event_id"].to_pylist()) | set(second["event_id"].to_pylist())
    assert len(events) == sum(t["steps"] for t in truth.values())  # zero events lost
    duplicates = set(first["event_id"].to_pylist()) & set(second["event_id"].to_pylist())
    assert len(duplicates) <= 64, len(duplicates)  # at least once: only acknowledgements lost in the crash


def test_a_broker_that_lost_its_data_loses_nothing_two_ingesters_had_read(tmp_path: Path) -> None:
    """Two ingesters of one group have read every record and stored none (no flush by size or
    idleness) when the broker restarts empty (Tansu: memory storage). The group forgets them, so
    their partitions are lost (eviction) or revoked; what they read is now the only copy. Each
    stores it before it stops on the source that went back, its message saying what it stored:
    every row of the load is stored once."""
    broker = TansuBroker().start()
    url = broker.url("lost")
    ingesters: list[tuple[subprocess.Popen[bytes], Path]] = []
    try:
        truth = loadgen(url, tmp_path / "truth.json", "--rows", "6000", "--engines", "4", "--seed", "5")
        env = {**os.environ, "PYTHONPATH": str(ROOT), "SPECMETRICS_INGEST_FLUSH_IDLE_S": "600",
               "SPECMETRICS_INGEST_LOG_INTERVAL_S": "0.2", "SPECMETRICS_KAFKA_SESSION_TIMEOUT_MS": "3000",
               "SPECMETRICS_KAFKA_HEARTBEAT_INTERVAL_MS": "500"}
        for i in range(2):
            log = tmp_path / f"ingest-{i}.log"
            with log.open("wb") as stderr:
                ingesters.append((subprocess.Popen(
                    [sys.executable, "-m", "specmetrics.cli", "-v", "ingest", "--source", url, "--out",
                     str(tmp_path / "out"), "--quiet"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr, env=env),
                    log))
        assigned = "ingest.sources.kafka: assigned partitions"

        def caught_up(log: Path) -> bool:  # lag 0 after its last assignment: it read all it was given
            text = log.read_text()
            return assigned in text and " lag 0 record(s)" in text.rpartition(assigned)[2]

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(caught_up(log) for _, log in ingesters):
            time.sleep(0.2)
        time.sleep(1.0)  # both settled in one generation (a join moves partitions: lag 0 again after)
        assert all(caught_up(log) for _, log in ingesters)
        assert not list((tmp_path / "out").glob(DATA_GLOB))  # all read, nothing stored yet
        broker.stop()
        broker.start()
        codes = []
        for process, _ in ingesters:
            try:
                codes.append(process.wait(60))
            except subprocess.TimeoutExpired:  # never assigned again: it stops, storing what it holds
                process.send_signal(signal.SIGTERM)
                codes.append(process.wait(60))
    finally:
        for process, _ in ingesters:
            if process.poll() is None:
                process.kill()
        broker.stop()
    logs = [log.read_text() for _, log in ingesters]
    assert 2 in codes, logs[0][-3000:] + logs[1][-3000:]
    assert "the broker lost its data" in "".join(logs)
    table = read_rows(tmp_path / "out")
    keys = pc.binary_join_element_wise(table["event_id"].cast("string"), table["request_id"], "|")
    assert table.num_rows == pc.count_distinct(keys).as_py() == total_rows(truth)


@pytest.mark.parametrize("url", ["kafka://user:pw@h:9092/t", "kafka://h:9092/", "kafka:///t"])
def test_bad_kafka_urls_are_clear_errors(url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ingest(url, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert "error:" in err and "pw" not in err


@pytest.mark.parametrize(("idle_flush_s", "handled_as"), [
    # it learns of the eviction when it polls: its partitions are lost
    ("600", "lost partitions [0, 1, 2]"),
    # it flushes on waking, and the table refuses the commit: the new owner committed those offsets
    ("3", "where the flush starts: another writer committed it"),
])
def test_an_evicted_ingester_leaves_no_file_of_what_it_buffered(
        kafka_url: str, tmp_path: Path, idle_flush_s: str, handled_as: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first ingester reads everything and is stopped (SIGSTOP: no heartbeats) before it
    flushes; the group evicts it and a second ingester takes the partitions and stores them.
    What the first one had buffered is the new owner's: when it wakes up, it must leave no file of it."""
    monkeypatch.setenv("SPECMETRICS_KAFKA_SESSION_TIMEOUT_MS", "2000")
    monkeypatch.setenv("SPECMETRICS_KAFKA_HEARTBEAT_INTERVAL_MS", "500")
    truth = loadgen(kafka_url, tmp_path / "truth.json", "--rows", "20000", "--engines", "3", "--seed", "11")
    out, log = tmp_path / "out", tmp_path / "first.log"
    assigned = "ingest.sources.kafka: assigned partitions"

    def caught_up() -> bool:  # lag 0 once assigned: every record is read (lag is 0 before, too)
        return " lag 0 record(s)" in log.read_text().partition(assigned)[2]

    with log.open("wb") as stderr:
        first = subprocess.Popen(
            [sys.executable, "-m", "specmetrics.cli", "-v", "ingest", "--source", kafka_url, "--out", str(out),
             "--quiet"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr,
            env={**os.environ, "PYTHONPATH": str(ROOT), "SPECMETRICS_INGEST_FLUSH_IDLE_S": idle_flush_s,
                 "SPECMETRICS_INGEST_LOG_INTERVAL_S": "0.2"})
    try:
        deadline = time.monotonic() + 60
        while not caught_up() and time.monotonic() < deadline:
            time.sleep(0.1)
        first.send_signal(signal.SIGSTOP)
        assert caught_up() and not list(out.glob(DATA_GLOB))  # everything is buffered, nothing flushed
        assert ingest(kafka_url, out, "--flush-rows", "2000") == 0  # joins once the first one's session expired
        first.send_signal(signal.SIGCONT)
        while log.read_text().count(assigned) < 2 and time.monotonic() < deadline + 60:
            time.sleep(0.1)  # the first one noticed the eviction and rejoined
        assert log.read_text().count(assigned) == 2
    finally:
        first.send_signal(signal.SIGCONT)
        first.send_signal(signal.SIGTERM)
        first.wait(60)
    assert first.returncode == 0, log.read_text()[-3000:]
    assert_exactly_once(out, truth)
    assert handled_as in log.read_text()
    assert set(out.glob(DATA_GLOB)) == {file.path for file in Table(out).files()}  # no file but those the log names
