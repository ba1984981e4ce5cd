"""The live metrics: how fast they count, and how fresh a scrape is.

Counting: the load generator's steps in a local log are decoded and validated as the ingester
does, in chunks of one poll (the baseline: its decode rate, request-steps per second); the
validated batches are kept, and the live metrics count them again on their own (the counting rate,
and its ratio to the decode rate). A scrape of the totals is timed once everything is counted.
Then the whole ingest (``Ingester.run`` to durable Parquet) without and with the live metrics.
Rounds alternate; the best of each is kept.

Freshness: a real ``specmetrics ingest --metrics-port`` follows a source while a real plugin
publisher (default settings: it sends every 100 ms) publishes one step at a time; the time from
``publish`` to the first scrape of ``/metrics`` that shows it (the endpoint polled every 5 ms) is
measured for each step, on the local log and on Kafka (the test broker on loopback).

Prints one JSON line.

    python -m benchmarks.bench_metrics [--rows 2000000] [--rounds 3] [--steps 200]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.args import positive_int
from benchmarks.bench_ingest import ingest_seconds
from devtools.kafka_broker import TansuBroker
from devtools.ports import free_port
from specmetrics.emitter.loadgen import LoadSpec, run_load
from specmetrics.emitter.publisher import EventPublisher
from specmetrics.emitter.settings import EmitterSettings
from specmetrics.emitter.sinks import LocalLogSink, open_sink
from specmetrics.ingest import IngestSettings
from specmetrics.ingest.batch import PartitionBuffer
from specmetrics.ingest.observer import IngestObserver, ValidatedSteps
from specmetrics.monitoring.exposition import LiveCollector
from specmetrics.monitoring.live import LiveMetrics
from specmetrics.schemas.wire import OutcomeColumns, decode_step
from specmetrics.transport.log import LocalLogReader

ROOT = Path(__file__).resolve().parents[1]
STEPS = "specmetrics_ingest_steps_total"
#: Records per poll, as the ingester asks for by default.
POLL_RECORDS = IngestSettings().poll_records


class Recorder(IngestObserver):
    """Keeps what the ingester reports, to count it again later."""

    def __init__(self) -> None:
        self.validated_steps: list[ValidatedSteps] = []

    def validated(self, source: str, steps: ValidatedSteps) -> None:
        self.validated_steps.append(steps)

    def lost(self, source: str, partition: int, first: int, last: int) -> None:
        pass

    def lag(self, source: str, records: dict[int, int]) -> None:
        pass


def decode_all(records: list[tuple[int, bytes]], observer: Recorder) -> float:
    """Seconds to decode and validate every record, in chunks of a poll (told to ``observer``)."""
    start = time.perf_counter()
    buffer = PartitionBuffer(0, records[0][0], observer=observer, source="log")
    for i, (offset, payload) in enumerate(records):
        buffer.add(offset, payload, decode_step(payload))
        if i % POLL_RECORDS == POLL_RECORDS - 1:
            buffer.convert()
    buffer.build()
    return time.perf_counter() - start


def count_all(validated: list[ValidatedSteps]) -> tuple[float, float]:
    """Seconds for fresh live metrics to count every batch, and for one scrape of the totals."""
    live = LiveMetrics()
    start = time.perf_counter()
    for steps in validated:
        live.validated("log", steps)
    counted = time.perf_counter() - start
    collector = LiveCollector(live)
    start = time.perf_counter()
    families = list(collector.collect())
    scraped = time.perf_counter() - start
    collector.close()
    assert any(sample.value for family in families for sample in family.samples)
    return counted, scraped


def counting(rows: int, rounds: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log"
        with LocalLogSink(log) as sink:
            stored = sum(t.rows for t in run_load(LoadSpec(rows=rows, engines=4, seed=1), sink).values())
        records = [(r.offset, r.payload) for r in LocalLogReader(log).read(10**9, 2**40)]
        plain, counted, scrapes, ingest, ingest_counted = [], [], [], [], []
        for _ in range(rounds):
            recorder = Recorder()
            plain.append(decode_all(records, recorder))
            count_s, scrape_s = count_all(recorder.validated_steps)
            counted.append(count_s)
            scrapes.append(scrape_s)
            ingest.append(ingest_seconds(log, Path(tmp) / "out", IngestSettings())[0])
            ingest_counted.append(ingest_seconds(log, Path(tmp) / "out", IngestSettings(), LiveMetrics())[0])
    decode_rate, count_rate = stored / min(plain), stored / min(counted)
    return {"rows": stored, "batches": len(recorder.validated_steps), "decode_rows_per_s": round(decode_rate),
            "count_rows_per_s": round(count_rate), "count_to_decode": round(count_rate / decode_rate, 2),
            "scrape_ms": round(min(scrapes) * 1000, 1), "ingest_rows_per_s": round(stored / min(ingest)),
            "ingest_with_metrics_to_without": round(min(ingest) / min(ingest_counted), 3)}


def steps_seen(port: int) -> float:
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            text = response.read().decode()
    except OSError:
        return -1
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == STEPS:
                return sample.value
    return -1


def step(i: int) -> tuple[dict[str, Any], OutcomeColumns]:
    envelope = {"event_id": f"fresh-{i}", "engine_instance": "bench", "dp_rank": 0, "model": "m", "vllm_version": "v",
                "method": "draft_model", "num_spec_tokens": 3, "drafter_max_len": 96, "step_index": i,
                "event_time_us": int(time.time() * 1e6), "batch_max_seq_len": 10}
    return envelope, OutcomeColumns([f"r{i}"], [0], [0], [3], [3], [0], [2], [3])


def freshness(sink_url: str, source_url: str, steps: int, ready: Callable[[], None]) -> dict[str, float]:
    """p50 and p99 seconds from publish to a scrape that shows the step."""
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        ready()
        process = subprocess.Popen(
            [sys.executable, "-m", "specmetrics.cli", "ingest", "--source", source_url, "--out", f"{tmp}/out",
             "--quiet", "--metrics-port", str(port)], cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        publisher = EventPublisher(lambda: open_sink(sink_url), EmitterSettings(sink=sink_url), step)
        try:
            publisher.publish(0)
            _wait(lambda: steps_seen(port) >= 1, 120)  # the ingester is up (a Kafka group joined)
            delays = []
            for i in range(1, steps + 1):
                start = time.perf_counter()
                publisher.publish(i)
                _wait(lambda i=i: steps_seen(port) >= i + 1, 30)  # type: ignore[misc]
                delays.append(time.perf_counter() - start)
                time.sleep(0.02)
        finally:
            publisher.close()
            process.terminate()
            process.wait(60)
    return {"p50_s": round(float(np.percentile(delays, 50)), 3), "p99_s": round(float(np.percentile(delays, 99)), 3)}


def _wait(condition: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the step never showed in a scrape")
        time.sleep(0.005)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=positive_int, default=2_000_000)
    parser.add_argument("--rounds", type=positive_int, default=3)
    parser.add_argument("--steps", type=positive_int, default=200, help="Steps timed for freshness, per source.")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"benchmark": "metrics", "counting": counting(args.rows, args.rounds)}
    with tempfile.TemporaryDirectory() as tmp:
        log = (Path(tmp) / "log").as_uri()
        result["freshness_local_log"] = freshness(log, log, args.steps, (Path(tmp) / "log").mkdir)
    with TansuBroker() as broker:
        url = broker.url("fresh")
        result["freshness_kafka"] = freshness(url, url, args.steps, lambda: None)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
