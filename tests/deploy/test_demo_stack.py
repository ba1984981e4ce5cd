"""The demo profile's services as plain processes against the test broker, with the commands
and environment parsed from docker-compose.yml: create-topics -> loadgen -> ingest (with its
healthcheck) -> reports -> reports-web. Only the broker address and the mount paths change."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
from kafka import KafkaAdminClient

from devtools.kafka_broker import TansuBroker
from devtools.ports import free_port
from devtools.s3_server import SeaweedS3
from specmetrics.cli import main
from specmetrics.queries.verify import verify_table
from specmetrics.storage.layout import DATA_GLOB
from specmetrics.storage.location import S3Location
from specmetrics.storage.table import is_table
from tests.support.compose import S3_OVERRIDE, HostProcess, healthcheck_argv, resolved_services
from tests.support.http import get
from tests.support.loadgen import rows_of
from tests.support.metrics import VIEW_SERIES, scrape, view_series
from tests.support.readers import numbers

ROWS = 3_000


def stored_rows(data: Path) -> int:
    return sum(pq.ParquetFile(f).metadata.num_rows for f in data.glob(DATA_GLOB))


def rows_on_s3(url: str) -> int:
    if not is_table(S3Location.parse(url)):  # before the ingester's first commit
        return 0
    return sum(row["rows"] for row in numbers(url)[0])  # type: ignore[arg-type]


def wait_for(condition: str, check: Callable[[], bool], proc: subprocess.Popen[str], timeout_s: float = 40) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        assert proc.poll() is None, f"exited with {proc.returncode} before {condition}: {proc.communicate()}"
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {condition}")


def stop(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    proc.send_signal(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return proc.returncode, out, err


def test_demo_profile_end_to_end(kafka_broker: TansuBroker, tmp_path: Path) -> None:
    topic = f"demo-{uuid.uuid4().hex[:8]}"
    passed_through = {k: v for k, v in os.environ.items() if k.startswith("SPECMETRICS_KAFKA_")}  # the test broker's
    services = resolved_services("demo", env={
        "STEPS_TOPIC": topic, "LOADGEN_ROWS": str(ROWS), "SPECMETRICS_INGEST_FLUSH_IDLE_S": "1", **passed_through})
    assert "vllm" not in services and "vllm-cpu" not in services
    stack = {name: HostProcess(services[name], kafka_broker.bootstrap, tmp_path)
             for name in ("kafka-init", "loadgen", "ingest", "reports", "reports-web")}
    assert stack["ingest"].env["SPECMETRICS_INGEST_FLUSH_IDLE_S"] == "1"  # .env values reach the container

    init = stack["kafka-init"].run()
    assert init.returncode == 0, init.stderr
    admin = KafkaAdminClient(bootstrap_servers=[kafka_broker.bootstrap])
    try:
        assert {topic, f"{topic}.dead-letter"} <= set(admin.list_topics())
    finally:
        admin.close()

    loadgen = stack["loadgen"].run()
    assert loadgen.returncode == 0, loadgen.stderr
    expected = rows_of(services["loadgen"]["command"], tmp_path / "reference-log")

    data = stack["ingest"].mounts["/var/lib/specmetrics/data"]
    assert stack["ingest"].env["SPECMETRICS_INGEST_METRICS_PORT"] == "9400"  # what prometheus.yml scrapes
    metrics_port = free_port()
    stack["ingest"].env |= {"SPECMETRICS_INGEST_METRICS_PORT": str(metrics_port),
                            "SPECMETRICS_INGEST_METRICS_HOST": "127.0.0.1"}
    ingest = stack["ingest"].start()
    try:
        wait_for(f"{expected} rows in {data}", lambda: stored_rows(data) >= expected, ingest)
        health = stack["ingest"].run(healthcheck_argv(services["ingest"]))
        assert health.returncode == 0 and health.stdout.startswith("healthy"), health.stdout + health.stderr
        live = scrape(metrics_port)
        assert live[("specmetrics_ingest_request_steps_total", ())] == expected
        assert {key: value for key, value in live.items() if key[0] in VIEW_SERIES} == view_series(data)
    finally:
        code, _, err = stop(ingest)
    assert code == 0, err
    assert stored_rows(data) == expected
    assert main(["verify", "--data", str(data)]) == 0

    reports = stack["reports"]
    assert reports.mounts["/var/lib/specmetrics/data"] == data  # the same named volume
    folder = reports.mounts["/var/lib/specmetrics/reports"]
    report = reports.start()
    try:
        wait_for("latest.html", lambda: (folder / "latest.html").exists() and (folder / "latest.md").exists(), report)
    finally:
        stop(report)

    web = stack["reports-web"]
    assert web.mounts["/var/lib/specmetrics/reports"] == folder
    port = free_port()
    web.argv[web.argv.index("--port") + 1] = str(port)
    web.argv[web.argv.index("--bind") + 1] = "127.0.0.1"  # 0.0.0.0 in the container
    server = web.start()
    try:
        wait_for("the report server", lambda: get(port, "/latest.html") is not None, server, timeout_s=20)
        assert get(port, "/latest.html") == (folder / "latest.html").read_bytes()
    finally:
        code, _, err = stop(server)
    assert code == 0, err


def test_the_s3_override_stores_the_demo_on_the_object_store_and_reports_read_it_there(
        kafka_broker: TansuBroker, s3_server: SeaweedS3, s3_url: str, tmp_path: Path) -> None:
    """docker-compose.s3.yml's ingest and reports against the suite's SeaweedFS in place of the s3
    service: the store's endpoint and keys come from .env, as an operator sets them."""
    topic, url = f"demo-{uuid.uuid4().hex[:8]}", s3_url
    passed_through = {k: v for k, v in os.environ.items() if k.startswith("SPECMETRICS_KAFKA_")}
    services = resolved_services("demo", overrides=(S3_OVERRIDE,), env={
        "STEPS_TOPIC": topic, "LOADGEN_ROWS": str(ROWS), "SPECMETRICS_INGEST_FLUSH_IDLE_S": "1", "S3_DATA_URL": url,
        **s3_server.environment(), **passed_through})
    stack = {name: HostProcess(services[name], kafka_broker.bootstrap, tmp_path)
             for name in ("kafka-init", "loadgen", "ingest", "reports")}
    assert stack["ingest"].env["SPECMETRICS_S3_ENDPOINT"] == s3_server.endpoint
    assert stack["kafka-init"].run().returncode == 0
    assert stack["loadgen"].run().returncode == 0
    expected = rows_of(services["loadgen"]["command"], tmp_path / "reference-log")

    stack["ingest"].env["SPECMETRICS_INGEST_METRICS_PORT"] = str(free_port())
    location = S3Location.parse(url)
    ingest = stack["ingest"].start()
    try:
        wait_for(f"{expected} rows in {url}", lambda: rows_on_s3(url) >= expected, ingest)
    finally:
        code, _, err = stop(ingest)
    assert code == 0, err
    assert rows_on_s3(url) == expected
    assert verify_table(location).clean
    assert not list(stack["ingest"].mounts["/var/lib/specmetrics/data"].glob(DATA_GLOB))  # locks and hints only

    folder = stack["reports"].mounts["/var/lib/specmetrics/reports"]
    report = stack["reports"].start()
    try:
        wait_for("latest.md", (folder / "latest.md").exists, report)
    finally:
        stop(report)
    assert f"\n{expected:,} request-steps from " in (folder / "latest.md").read_text()
