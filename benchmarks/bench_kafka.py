"""Kafka → durable Parquet on this machine (broker on loopback, topic pre-filled), in the same
run as (a) the ceiling: a plain pyarrow write of the same rows from memory, and (b) a naive
baseline: one Kafka record per request-step (JSON), parsed one by one into Python rows,
then written with pyarrow. Also the producer side: the load generator through the Kafka sink
(messages/s, bytes/s).

The ingest clock starts at the first record (a Tansu consumer-group join takes about half
the session timeout, a test-broker artifact) and stops when the last flush is committed.
Rounds use a fresh consumer group and output each; the best of each measure is reported.
Prints one JSON line.

    python -m benchmarks.bench_kafka [--rows 4000000] [--batch-size 256] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from kafka import KafkaConsumer, KafkaProducer

from benchmarks.args import positive_int
from devtools.kafka_broker import TansuBroker
from specmetrics.emitter.loadgen import LoadSpec, run_load
from specmetrics.emitter.sinks import open_sink
from specmetrics.ingest import Ingester, IngestSettings, IngestStats
from specmetrics.ingest.sources.kafka import KafkaSource
from specmetrics.schemas.wire import step_event_from_wire
from specmetrics.storage.layout import DATA_GLOB, STATE_DIR
from specmetrics.transport.kafka import KafkaAddress, KafkaSettings, ensure_topic
from specmetrics.transport.log import LocalLogReader


def prefill(url: str, rows: int, batch_size: int) -> dict[str, float]:
    start = time.perf_counter()
    with open_sink(url, "bench") as sink:
        run_load(LoadSpec(rows=rows, engines=4, batch_size=batch_size, seed=1), sink)
        health = sink.health()
    seconds = time.perf_counter() - start
    return {"messages": health["delivered"], "bytes": health["delivered_bytes"], "seconds": seconds}


def kafka_ingest(url: str, out: Path, group: str, settings: IngestSettings) -> tuple[float, IngestStats]:
    shutil.rmtree(out, ignore_errors=True)
    first_record: list[float] = []

    def progress(stats: IngestStats) -> None:
        if not first_record and stats.records:
            first_record.append(time.perf_counter())

    source = KafkaSource(KafkaAddress.parse(url), group, out / STATE_DIR)
    ingester = Ingester(source, out, settings)
    try:
        stats = ingester.run(once=True, progress=progress)
        end = time.perf_counter()
    finally:
        ingester.close()
        source.close()
    return end - first_record[0], stats


def naive_baseline(broker: TansuBroker, rows: int, settings: KafkaSettings, out: Path) -> float:
    """One JSON record per request-step, consumed and parsed one at a time."""
    address = KafkaAddress.parse(broker.url("naive"))
    ensure_topic(address, settings)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=20, batch_size=1 << 20)
    log = out / "naive-log"
    with open_sink(log.as_uri()) as sink:
        run_load(LoadSpec(rows=rows, engines=4, seed=2), sink)
    for record in LocalLogReader(log).read(1 << 30, 1 << 40):
        event = step_event_from_wire(record.payload)
        envelope = event.model_dump(mode="json", exclude={"outcomes"})
        for outcome in event.model_dump(mode="json")["outcomes"]:
            producer.send(address.topic, json.dumps({**envelope, **outcome}).encode())
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(address.topic, bootstrap_servers=broker.bootstrap, group_id="naive",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=6000, heartbeat_interval_ms=2000)
    parsed: list[dict[str, object]] = []
    start = None
    while len(parsed) < rows:
        for records in consumer.poll(500).values():
            if start is None:
                start = time.perf_counter()
            parsed += [json.loads(r.value) for r in records]
    pq.write_table(pa.Table.from_pylist(parsed), out / "naive.parquet", compression="zstd")
    consumer.commit()
    seconds = time.perf_counter() - (start or 0.0)
    consumer.close()
    return len(parsed) / seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=positive_int, default=4_000_000)
    parser.add_argument("--batch-size", type=positive_int, default=256, help="Request-steps per step message.")
    parser.add_argument("--rounds", type=positive_int, default=3)
    parser.add_argument("--naive-rows", type=positive_int, default=200_000)
    args = parser.parse_args(argv)
    settings = IngestSettings()
    with tempfile.TemporaryDirectory() as tmp, TansuBroker() as broker:
        root = Path(tmp)
        os.environ.setdefault("SPECMETRICS_KAFKA_SPOOL_DIR", str(root / "spool"))
        os.environ.setdefault("SPECMETRICS_KAFKA_SESSION_TIMEOUT_MS", "6000")
        os.environ.setdefault("SPECMETRICS_KAFKA_HEARTBEAT_INTERVAL_MS", "2000")
        url = broker.url("steps")
        produced = prefill(url, args.rows, args.batch_size)
        ingest_times, write_times = [], []
        rows = 0
        for round_ in range(args.rounds):
            seconds, stats = kafka_ingest(url, root / "out", f"bench-{round_}", settings)
            rows = stats.rows
            ingest_times.append(seconds)
            files = sorted((root / "out").glob(DATA_GLOB))
            table = pa.concat_tables(pq.read_table(f) for f in files)
            start = time.perf_counter()
            pq.write_table(table, root / "plain.parquet", compression=settings.compression,
                           row_group_size=settings.row_group_rows)
            write_times.append(time.perf_counter() - start)
            del table
        naive = naive_baseline(broker, args.naive_rows, KafkaSettings(), root)
    e2e, ceiling = rows / min(ingest_times), rows / min(write_times)
    print(json.dumps({
        "bench": "kafka_to_parquet", "rows": rows, "outcomes_per_message": args.batch_size,
        "e2e_rows_per_s": round(e2e), "plain_write_rows_per_s": round(ceiling),
        "e2e_vs_plain_write": round(e2e / ceiling, 3),
        "naive_rows_per_s": round(naive), "e2e_vs_naive": round(e2e / naive, 1),
        "producer_messages_per_s": round(produced["messages"] / produced["seconds"]),
        "producer_bytes_per_s": round(produced["bytes"] / produced["seconds"]),
        "producer_rows_per_s": round(rows / produced["seconds"]),
    }))


if __name__ == "__main__":
    main()
