"""The live endpoint of a real `specmetrics ingest` process, scraped over HTTP: its counters equal
the views over the tree the same process wrote, and what restarts do to them."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from devtools.ports import free_port
from specmetrics.emitter.sinks import LocalLogSink
from specmetrics.ingest.batch import DUPLICATE_STEP
from specmetrics.queries.catalog import connect, run_query
from specmetrics.queries.verify import verify_table
from specmetrics.schemas.events import VllmCounts
from specmetrics.schemas.wire import step_event_to_wire
from specmetrics.storage.layout import DATA_GLOB
from tests.support.events import step_event
from tests.support.loadgen import write_load
from tests.support.metrics import VIEW_SERIES, Samples, scrape, series, view_series, wait_for

ROOT = Path(__file__).resolve().parents[2]
ROWS = "specmetrics_ingest_request_steps_total"


def ingest(source: str, out: Path, port: int, *extra: str) -> subprocess.Popen[bytes]:
    """``specmetrics ingest`` following ``source``, serving its metrics on ``port``; no flush for
    being idle, so what is buffered stays so until a flush by size or a stop."""
    return subprocess.Popen(
        [sys.executable, "-m", "specmetrics.cli", "ingest", "--source", source, "--out", str(out), "--quiet",
         "--metrics-port", str(port), *extra],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "SPECMETRICS_INGEST_FLUSH_IDLE_S": "600"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def counted(port: int) -> float:
    try:
        return scrape(port).get((ROWS, ()), -1)
    except OSError:  # not listening yet
        return -1


def stop(process: subprocess.Popen[bytes]) -> int:
    """SIGTERM (flush and commit); the request-steps the process reports it stored."""
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err.decode()
    return int(out.decode().split()[1].replace(",", ""))


def rows_of(files: list[Path]) -> int:
    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


def test_the_counters_equal_the_views_over_the_same_data(tmp_path: Path) -> None:
    log, out, port = tmp_path / "log", tmp_path / "out", free_port()
    truth = write_load(log, rows=40_000, engines=3, num_spec_tokens=4, grammar_invalid_rate=0.2, k_zero_rate=0.1,
                       drafter_max_len=1600)
    truth |= write_load(log, rows=10_000, num_spec_tokens=2, scheduling="sync", grammar_invalid_rate=0.3,
                        engine_prefix="sync", seed=3)
    redelivered = step_event_to_wire(step_event(dropped_steps=9, event_id="boot1-8", step_index=8, max_model_len=96,
                                                context_cap_from=2048))
    with LocalLogSink(log) as sink:  # a dead letter, and two steps of a plugin that dropped steps, one delivered twice
        sink.send(b"node-a", [b"\xc1not msgpack", step_event_to_wire(step_event(dropped_steps=4)), redelivered])
        sink.send(b"node-a", [redelivered])  # at least once: a producer that sent it again (the Kafka spool)
    total = sum(t.rows for t in truth.values()) + 8  # the copy is a dead letter
    process = ingest(log.as_uri(), out, port, "--flush-rows", "9000")
    try:
        wait_for(lambda: counted(port) == total, what=f"{total} request-steps counted")
        samples = scrape(port)
    finally:
        stored = stop(process)
    assert stored == total
    expected = view_series(out)
    assert len({key[1] for key in expected}) > 10  # groups, positions, kinds: 5 groups in all
    assert {key: value for key, value in samples.items() if key[0] in VIEW_SERIES} == expected
    group = (("engine", "node-a/dp0"), ("method", "draft_model"), ("model_name", "tiny-target"),
             ("num_spec_tokens", "3"))
    assert series(samples, "specmetrics_plugin_dropped_steps_total") == {
        ("specmetrics_plugin_dropped_steps_total", group): 9}
    # the context cap, only where events report it (the load generator's do not), as the view has it
    assert series(samples, "specmetrics_max_model_len") == {("specmetrics_max_model_len", group): 96}
    assert series(samples, "specmetrics_context_cap_from") == {("specmetrics_context_cap_from", group): 2048}
    con = connect(out)
    assert run_query(con, "SELECT engine_id, max_model_len, context_cap_from FROM context_caps").to_pylist() == [
        {"engine_id": "node-a/dp0", "max_model_len": 96, "context_cap_from": 2048}]
    con.close()
    assert samples[("specmetrics_ingest_dead_letters_total", ())] == 2
    assert samples[("specmetrics_ingest_duplicate_steps_total", ())] == 1
    assert samples[("specmetrics_ingest_steps_total", ())] == sum(t.steps for t in truth.values()) + 2
    report = verify_table(out)  # the copy is set aside, counted once by the endpoint as by the views
    assert (report.duplicate_events, report.duplicate_examples) == (0, [])
    assert sorted((aside.records, aside.reason) for aside in report.set_aside) == [
        (1, DUPLICATE_STEP), (1, "not a msgpack step message: FormatError")]
    last = series(samples, "specmetrics_last_event_timestamp_seconds")
    assert last[("specmetrics_last_event_timestamp_seconds", group)] == step_event().event_time.timestamp()
    # vLLM's own counters, as the load generator's steps carry them (schema 1.6), equal the vLLM-compatible ones
    for name in ("drafts", "draft_tokens", "accepted_tokens", "accepted_tokens_per_pos"):
        own = {labels: value for (_, labels), value in series(
            samples, f"specmetrics_vllm_own_spec_decode_{name}_total").items()}
        compatible = {labels: value for (_, labels), value in series(
            samples, f"specmetrics_vllm_spec_decode_{name}_total").items() if dict(labels)["engine"] != "node-a/dp0"}
        assert own == compatible and len({dict(labels)["engine"] for labels in own}) == 4, name  # 3 + 1 engines
    assert series(samples, "specmetrics_vllm_counts_missing_steps_total") == {
        ("specmetrics_vllm_counts_missing_steps_total", tuple(sorted((*group, ("reason", "unreported"))))): 2}


def test_vllm_counting_differently_shows_on_the_endpoint(tmp_path: Path) -> None:
    """Steps whose vLLM counters say one draft token less than the plugin's outcomes make (vLLM's
    counting moved): the own counter and the vLLM-compatible one part, by exactly that."""
    log, out, port = tmp_path / "log", tmp_path / "out", free_port()
    equal = VllmCounts(num_drafts=3, num_draft_tokens=7, num_accepted_tokens=3, num_accepted_tokens_per_pos=[2, 1, 0])
    less = equal.model_copy(update={"num_draft_tokens": 6})
    with LocalLogSink(log) as sink:
        sink.send(b"node-a", [step_event_to_wire(step_event(event_id=f"boot1-{i}", step_index=i,
                                                            vllm_counts=less if i % 2 else equal)) for i in range(6)])
    process = ingest(log.as_uri(), out, port)
    try:
        wait_for(lambda: counted(port) == 24, what="24 request-steps counted")
        samples = scrape(port)
    finally:
        stop(process)
    group = (("engine", "node-a/dp0"), ("method", "draft_model"), ("model_name", "tiny-target"),
             ("num_spec_tokens", "3"))
    assert (samples[("specmetrics_vllm_spec_decode_draft_tokens_total", group)],
            samples[("specmetrics_vllm_own_spec_decode_draft_tokens_total", group)]) == (6 * 7, 6 * 7 - 3)
    assert samples[("specmetrics_vllm_spec_decode_drafts_total", group)] == \
        samples[("specmetrics_vllm_own_spec_decode_drafts_total", group)] == 6 * 3
    assert series(samples, "specmetrics_vllm_counts_missing_steps_total") == {}


def test_steps_with_vllms_counters_only_show_apart_and_count_in_no_audit_or_corrected_series(tmp_path: Path) -> None:
    """Steps the plugin saw only through vLLM's stat logger (its hook was off) beside steps it observed:
    their vLLM counters have series of their own; the audit's own counters and every request-step
    series hold the observed steps only."""
    log, out, port = tmp_path / "log", tmp_path / "out", free_port()
    counts = VllmCounts(num_drafts=3, num_draft_tokens=7, num_accepted_tokens=3, num_accepted_tokens_per_pos=[2, 1, 0])
    only = VllmCounts(num_drafts=2, num_draft_tokens=6, num_accepted_tokens=5, num_accepted_tokens_per_pos=[2, 2, 1])
    with LocalLogSink(log) as sink:
        sink.send(b"node-a", [step_event_to_wire(step_event(event_id=f"boot1-{i}", step_index=i, vllm_counts=counts))
                              for i in range(4)])
        sink.send(b"node-a", [step_event_to_wire(step_event(
            [{"kind": "vllm_only", "request_id": "*", "emitted": 0}], event_id=f"boot2-{i}", step_index=i,
            vllm_counts=only, vllm_only="step_hook_off", batch_max_seq_len=None)) for i in range(3)])
    process = ingest(log.as_uri(), out, port)
    try:
        wait_for(lambda: counted(port) == 4 * 4, what="the observed steps' 16 request-steps counted")
        wait_for(lambda: scrape(port).get(("specmetrics_ingest_steps_total", ())) == 7, what="7 steps counted")
        samples = scrape(port)
    finally:
        stop(process)
    group = (("engine", "node-a/dp0"), ("method", "draft_model"), ("model_name", "tiny-target"),
             ("num_spec_tokens", "3"))
    reason = tuple(sorted((*group, ("reason", "step_hook_off"))))
    assert {name: samples[(f"specmetrics_vllm_only_{name}_total", reason)] for name in (
        "steps", "spec_decode_drafts", "spec_decode_draft_tokens", "spec_decode_accepted_tokens")} == {
        "steps": 3, "spec_decode_drafts": 6, "spec_decode_draft_tokens": 18, "spec_decode_accepted_tokens": 15}
    assert samples[("specmetrics_vllm_own_spec_decode_drafts_total", group)] == \
        samples[("specmetrics_vllm_spec_decode_drafts_total", group)] == 4 * 3
    assert samples[("specmetrics_ingest_request_steps_total", ())] == 4 * 4
    assert {dict(labels)["kind"] for _, labels in series(samples, "specmetrics_request_steps_total")} == {
        "drafted", "skipped_for_length", "grammar_invalid", "k_zero"}


def test_a_restart_counts_exactly_what_the_stored_files_do_not_hold(tmp_path: Path) -> None:
    """SIGTERM: the next process counts what came after, nothing twice. SIGKILL: the next process
    counts exactly the rows the killed one had not stored; what the killed one had counted of
    those is counted twice, at most one unflushed buffer per partition (docs/metrics.md)."""
    log, out = tmp_path / "log", tmp_path / "out"
    parts = [sum(t.rows for t in write_load(log, rows=30_000, engine_prefix="a").values())]
    port = free_port()
    first = ingest(log.as_uri(), out, port, "--flush-rows", "10000")
    wait_for(lambda: counted(port) == parts[0], what="the first part counted")
    assert stop(first) == parts[0]

    parts.append(sum(t.rows for t in write_load(log, rows=25_000, engine_prefix="b", seed=2).values()))
    port = free_port()
    second = ingest(log.as_uri(), out, port, "--flush-rows", "10000")
    try:  # exactly the second part: nothing of the first counted again
        wait_for(lambda: counted(port) == parts[1], what="the second part counted")
    finally:
        second.kill()
        second.wait()
    files_before = {f: f.stat().st_mtime_ns for f in out.glob(DATA_GLOB)}

    def stored_before() -> int:
        """Rows of the files the killed process left complete (the next one keeps them as they are)."""
        return rows_of([f for f, mtime in files_before.items() if f.exists() and f.stat().st_mtime_ns == mtime])

    parts.append(sum(t.rows for t in write_load(log, rows=20_000, engine_prefix="c", seed=3).values()))
    total = sum(parts)
    port = free_port()
    third = ingest(log.as_uri(), out, port, "--flush-rows", "10000")
    try:  # it counts only after the recovery that removes a flush the kill cut short
        wait_for(lambda: counted(port) > 0 and counted(port) + stored_before() == total,
                 what="the third process counting what is not stored")
    finally:
        assert stop(third) == total - stored_before()
    counted_twice = parts[0] + parts[1] - stored_before()
    assert 0 < counted_twice <= 10_000, counted_twice  # the killed process's unflushed buffer
    assert rows_of(sorted(out.glob(DATA_GLOB))) == total


@pytest.mark.usefixtures("kafka_broker")
def test_two_ingesters_in_one_group_count_each_request_step_once(kafka_url: str, tmp_path: Path) -> None:
    """A rebalance revokes partitions after flushing them: the sum over both endpoints is exact."""
    from specmetrics.cli import main

    assert main(["loadgen", "--sink", kafka_url, "--rows", "60000", "--engines", "6", "--seed", "11"]) == 0
    out, ports = tmp_path / "out", [free_port(), free_port()]
    processes = [ingest(kafka_url, out, port, "--flush-rows", "3000") for port in ports]
    try:
        wait_for(lambda: sum(max(0, counted(p)) for p in ports) >= 60_000, timeout_s=120,
                 what="both ingesters counting everything")
        topic_partitions = sorted(str(p) for p in range(int(os.environ["SPECMETRICS_KAFKA_TOPIC_PARTITIONS"])))
        wait_for(lambda: sorted(p for _, p in lags([scrape(port) for port in ports])) == topic_partitions,
                 timeout_s=30, what="the lag of each partition, reported by one ingester")
        samples = [scrape(port) for port in ports]
    finally:
        total = sum(stop(p) for p in processes)
    assert total == sum(s[(ROWS, ())] for s in samples)
    assert all(s[(ROWS, ())] > 0 for s in samples)  # both took part
    summed: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for sample in samples:
        for key, value in sample.items():
            if key[0] in VIEW_SERIES:
                summed[key] = summed.get(key, 0) + value
    assert summed == view_series(out)
    partitions = {str(p) for (p,) in connect(out).sql("SELECT DISTINCT log_partition FROM request_steps").fetchall()}
    assert sorted(partition for _, partition in lags(samples)) == sorted(partitions)  # each read by one ingester
    assert set(lags(samples).values()) == {0}


def lags(samples: list[Samples]) -> dict[tuple[int, str], float]:
    """Per (ingester, partition): the lag that ingester reports."""
    return {(i, dict(labels)["partition"]): value for i, one in enumerate(samples)
            for (_, labels), value in series(one, "specmetrics_ingest_consumer_lag_records").items()}


def test_a_port_in_use_is_a_clear_error_before_anything_is_read(tmp_path: Path) -> None:
    write_load(tmp_path / "log", rows=1000)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        process = ingest((tmp_path / "log").as_uri(), tmp_path / "out", taken.getsockname()[1])
        _, err = process.communicate(timeout=60)
    assert process.returncode == 2
    assert "specmetrics ingest: error: cannot serve the metrics on 0.0.0.0:" in err.decode()
    assert "in use" in err.decode()
    assert not list((tmp_path / "out").glob(DATA_GLOB))
