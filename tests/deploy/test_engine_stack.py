"""``docker compose --profile demo --profile monitoring up --scale ingest=2`` on a real Docker engine:
the project's own Dockerfiles and compose file, with stand-ins only for the images no registry gives
here (tests/support/docker_engine.py); Grafana, which has none, is left out.

- The demo path end to end: loadgen -> Kafka -> two ingest replicas -> Parquet in the named volume ->
  reports -> reports-web, checked against the load generator's truth (the same spec and seed, run
  here), with every service's writable paths owned by the image's unprivileged user on a fresh volume.
- Monitoring: Prometheus scrapes every ingest replica through the compose file's own scrape config,
  loads alerts.yml, and gives back the views' corrected counters."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from devtools.ports import free_port
from tests.support.docker_engine import DATA, Stack, compose_project, docker, prepare_images
from tests.support.http import get
from tests.support.http import prometheus_api as api
from tests.support.loadgen import rows_of
from tests.support.metrics import VIEW_SERIES, Samples, view_series, wait_for

PROJECT = "specmetrics-enginetest"
ROWS = 3_000
INGESTERS = 2
STALE_AFTER_S = 6  # INGEST_MAX_AGE_S here: a stalled ingester is unhealthy after this plus 3 checks of 2 s
#: Run in an ingest container with a signal name: sends it to the `specmetrics ingest` process.
STOP_INGESTER = ("import os, signal, sys\n"
                 "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
                 "    argv = open(f'/proc/{pid}/cmdline', 'rb').read().split(b'\\0')\n"
                 "    if int(pid) not in (1, os.getpid()) and argv[1:2] and argv[1].endswith(b'/specmetrics') \\\n"
                 "            and b'ingest' in argv:\n"
                 "        os.kill(int(pid), getattr(signal, sys.argv[1]))\n")
SERVICES = ("kafka", "kafka-init", "ingest", "loadgen", "reports", "reports-web", "maintenance", "prometheus")
APP_USER = "10001"  # docker/app.Dockerfile's specmetrics user
REPORTS = "/var/lib/specmetrics/reports"
ALERTS_FILE = Path(__file__).parents[2] / "docker" / "monitoring" / "prometheus" / "alerts.yml"


@pytest.fixture(scope="module")
def stack(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    env = {"STEPS_TOPIC": "enginetest.steps", "LOADGEN_ROWS": ROWS, "SPECMETRICS_INGEST_FLUSH_IDLE_S": 1,
           "SPECMETRICS_INGEST_FLUSH_ROWS": 2000,  # files while a stream goes on
           "REPORTS_PORT": free_port(), "PROMETHEUS_PORT": free_port(), "KAFKA_HOST_PORT": free_port(),
           "INGEST_MAX_AGE_S": STALE_AFTER_S, "INGEST_HEALTH_INTERVAL": "2s",  # the stall test's timings
           "SPECMETRICS_KAFKA_LEAVE_GROUP_ON_CLOSE": "false"}  # Tansu stands in for Kafka (docs/kafka.md)
    with compose_project(PROJECT, prepare_images(), tmp_path_factory.mktemp("engine") / "stack.env",
                         ("demo", "monitoring"), env, ("--scale", f"ingest={INGESTERS}", *SERVICES)) as up:
        yield up


def stored(stack: Stack) -> int:
    return int(stack.sql("SELECT count(*) AS n FROM request_steps")[0]["n"])


@pytest.fixture(scope="module")
def expected(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> int:
    """The load generator's rows, once every one of them is stored: the same spec and seed run here."""
    config = json.loads(stack("config", "--format", "json"))["services"]
    rows = rows_of(config["loadgen"]["command"], tmp_path_factory.mktemp("reference") / "log")
    assert rows >= ROWS
    wait_for(lambda: stack.state("loadgen")["State"] == "exited", 120, "the load generator to finish", 1)
    assert (stack.state("kafka-init")["ExitCode"], stack.state("loadgen")["ExitCode"]) == (0, 0)
    wait_for(lambda: stored(stack) >= rows, 120, f"{rows} rows in the data volume", 1)
    return rows


def test_demo_profile_on_a_real_engine_stores_the_load_generators_truth_and_serves_the_report(
        stack: Stack, expected: int) -> None:
    containers = stack.containers()
    assert sorted(c["Service"] for c in containers) == sorted([*SERVICES, *["ingest"] * (INGESTERS - 1)])
    assert stored(stack) == expected
    assert all(c["Health"] == "healthy" for c in containers if c["Service"] == "ingest")
    stack.exec("ingest", "specmetrics", "verify", "--data", DATA)

    # The unprivileged user owns what each service writes: the named volumes and the tmpfs.
    for service, folder in (("ingest", DATA), ("ingest", "/run/specmetrics"), ("reports", REPORTS),
                            ("reports", "/run/specmetrics")):
        assert stack.exec(service, "id", "-u").strip() == APP_USER
        assert stack.exec(service, "find", folder, "!", "-user", APP_USER) == "", (service, folder)
    assert "ingest.heartbeat" in stack.exec("ingest", "ls", "/run/specmetrics")

    def checkpoints() -> list[int]:  # the versions the maintenance service's runs checkpointed, in order
        return [int(v) for v in re.findall(r"checkpointed \S+ at version (\d+)", stack("logs", "maintenance"))]

    ran = len(checkpoints())  # its run at the stack's start, unless that one still runs
    stack("restart", "maintenance")  # it runs at start: merges, checkpoints and vacuums the table
    wait_for(lambda: len(checkpoints()) > ran, 120, "the maintenance service's run", 1)
    assert "_last_checkpoint" in stack.exec("ingest", "ls", f"{DATA}/_delta_log")
    maintenance = json.loads(stack("config", "--format", "json"))["services"]["maintenance"]["healthcheck"]["test"]
    assert stack("exec", "-T", "maintenance", *maintenance[1:], check=False).startswith("healthy")
    for folder in (DATA, "/run/specmetrics"):  # what it wrote (rollups, the checkpoint, its heartbeat) too
        assert stack.exec("maintenance", "find", folder, "!", "-user", APP_USER) == "", folder
    assert stored(stack) == expected
    stack.exec("ingest", "specmetrics", "verify", "--data", DATA)

    stack("restart", "reports")  # it runs at start: now over every stored row
    port, served = int(stack.env["REPORTS_PORT"]), f"{expected:,} request-steps"

    def report_served() -> bool:
        body = get(port, "/latest.md")
        return body is not None and served in body.decode()

    wait_for(report_served, 120, f"a report of {served} on port {port}", 1)
    html = get(port, "/latest.html")
    assert html is not None and html == stack.exec("reports-web", "cat", f"{REPORTS}/latest.html").encode()
    healthcheck = json.loads(stack("config", "--format", "json"))["services"]["reports"]["healthcheck"]["test"]

    def reports_healthy() -> bool:  # what Docker runs every minute; the heartbeat follows the report
        return stack("exec", "-T", "reports", *healthcheck[1:], check=False).startswith("healthy")

    wait_for(reports_healthy, 30, "the reports healthcheck to pass", 1)


def prometheus_series(port: int) -> Samples:
    """Each counter of :data:`VIEW_SERIES` summed over the ingest replicas, as Prometheus holds it
    (an empty label is an absent one there)."""
    found: Samples = {}
    for name in VIEW_SERIES:
        for result in api(port, "/api/v1/query", query=f"sum without (instance, job) ({name})")["result"]:
            found[(name, tuple(sorted(result["metric"].items())))] = float(result["value"][1])
    return found


def test_prometheus_scrapes_every_ingest_replica_loads_the_alerts_and_gives_back_the_views(
        stack: Stack, expected: int, tmp_path: Path) -> None:
    port = int(stack.env["PROMETHEUS_PORT"])
    rules = yaml.safe_load(ALERTS_FILE.read_text())
    loaded = api(port, "/api/v1/rules")["groups"]
    assert sorted((g["name"], len(g["rules"])) for g in loaded) == sorted(
        (g["name"], len(g["rules"])) for g in rules["groups"])

    def every_replica_up() -> bool:
        targets = [t for t in api(port, "/api/v1/targets")["activeTargets"]
                   if t["labels"]["job"] == "specmetrics-ingest"]
        return len(targets) == INGESTERS and all(t["health"] == "up" for t in targets)

    wait_for(every_replica_up, 90, f"{INGESTERS} ingest replicas scraped", 1)

    stack("cp", f"ingest:{DATA}", str(tmp_path / "data"))
    views = {(name, tuple((k, v) for k, v in labels if v)): value
             for (name, labels), value in view_series(tmp_path / "data").items()}
    assert sum(v for (name, _), v in views.items() if name == "specmetrics_request_steps_total") == expected
    latest: list[Samples] = []

    def scraped_after_the_last_row() -> bool:
        latest[:] = [prometheus_series(port)]
        return latest[0] == views

    try:
        wait_for(scraped_after_the_last_row, 90, "Prometheus to hold the views' counters", 1)
    except AssertionError:
        differ = {key: (latest[0].get(key), views.get(key)) for key in {*latest[0], *views}
                  if latest[0].get(key) != views.get(key)}
        raise AssertionError(f"Prometheus vs the views, where they differ: {differ}") from None


def unique_rows(stack: Stack) -> tuple[int, int]:
    got = stack.sql("SELECT count(*) AS n, count(DISTINCT (event_id, request_id)) AS u FROM request_steps")[0]
    return int(got["n"]), int(got["u"])


def verified(stack: Stack) -> None:
    """``verify`` over the data volume: clean, or clean but for duplicates set aside (exit 3): steps the
    load generator sent again after a broker restart lost their acknowledgements."""
    proc = docker(*stack.base, "exec", "-T", "ingest", "specmetrics", "verify", "--data", DATA, check=False)
    assert proc.returncode in (0, 3), proc.stdout + proc.stderr
    aside = [line for line in proc.stdout.splitlines() if line.startswith("set aside:")]
    assert bool(aside) is (proc.returncode == 3) and all("duplicate step" in line for line in aside), proc.stdout


def test_ingest_killed_and_the_broker_restarted_mid_stream_then_the_stack_down_and_up_lose_nothing(
        stack: Stack, expected: int, tmp_path: Path) -> None:
    """Every ingest replica SIGKILLed while a second load generator streams, then started again; the
    broker restarted, still mid-stream; then ``docker compose down`` (the volumes stay) and ``up``: the
    named volumes hold every row once, and the broker its log."""
    argv = ["specmetrics", "loadgen", "--sink", "kafka://kafka:9092/enginetest.steps", "--realtime",
            "--rows", "60000", "--engines", "2", "--engine-prefix", "faults", "--step-ms", "50"]
    total = expected + rows_of(argv, tmp_path / "reference-log")
    name = f"{PROJECT}-faults"

    def streaming() -> bool:
        return docker("inspect", "--format", "{{.State.Running}}", name).stdout.strip() == "true"

    stack("run", "--detach", "--no-deps", "--name", name, "loadgen", *argv)
    try:
        wait_for(lambda: stored(stack) > expected + 2_000, 120, "the second stream to reach the data volume", 1)
        stack("kill", "ingest")
        assert {c["State"] for c in stack.containers() if c["Service"] == "ingest"} == {"exited"}
        assert streaming()
        stack("start", "ingest")
        before = stored(stack)
        stack("restart", "kafka", timeout=300)
        assert streaming()
        wait_for(lambda: stored(stack) > before + 2_000, 120, "rows stored through the restarted broker", 1)
        assert docker("wait", name, timeout=300).stdout.strip() == "0"
    finally:
        docker("rm", "--force", name, check=False)
    wait_for(lambda: stored(stack) >= total, 120, f"{total} rows in the data volume", 1)
    assert unique_rows(stack) == (total, total)
    verified(stack)

    stack("down", timeout=300)  # the volumes stay
    assert stack.containers() == []
    recreated = ("kafka", "ingest", "reports", "reports-web")  # not the load generator again
    stack("up", "--detach", "--no-deps", "--scale", f"ingest={INGESTERS}", *recreated, timeout=900)

    def healthy() -> bool:
        health = {c["Service"]: c["Health"] for c in stack.containers() if c["Service"] in ("kafka", "ingest")}
        ingest = [c["Health"] for c in stack.containers() if c["Service"] == "ingest"]
        return health.get("kafka") == "healthy" and ingest == ["healthy"] * INGESTERS

    # Healthy shows the broker kept its log: over a broker that lost it, the ingesters stop (exit 2,
    # "the source went back": its offsets end below the stored files').
    wait_for(healthy, 120, "the new broker and ingest replicas to turn healthy", 1)
    assert unique_rows(stack) == (total, total)
    verified(stack)


def test_a_stalled_ingester_turns_unhealthy_and_healthy_again(stack: Stack, expected: int) -> None:
    """SIGSTOP stalls every ingest replica: its heartbeat ages, and the compose healthcheck marks it
    unhealthy after INGEST_MAX_AGE_S plus three failed checks; SIGCONT: healthy at the next check.
    The timings are the compose file's, shortened through the variables .env.example documents."""
    def health() -> list[str]:
        return [c["Health"] for c in stack.containers() if c["Service"] == "ingest"]

    def signal_ingesters(name: str) -> None:
        """``name`` to the ingester process of every replica: not to PID 1, the compose file's init,
        which would stop itself and leave the ingester running."""
        for index in range(1, INGESTERS + 1):
            stack("exec", "-T", "--index", str(index), "ingest", "python3", "-c", STOP_INGESTER, name, timeout=60)

    wait_for(lambda: health() == ["healthy"] * INGESTERS, 120, "ingest to be healthy", 1)
    stopped = time.monotonic()
    signal_ingesters("SIGSTOP")
    try:
        wait_for(lambda: health() == ["unhealthy"] * INGESTERS, 60, "the stalled replicas to turn unhealthy", 0.5)
        assert time.monotonic() - stopped >= STALE_AFTER_S  # not before the heartbeat is that old
    finally:
        signal_ingesters("SIGCONT")
    wait_for(lambda: health() == ["healthy"] * INGESTERS, 30, "the replicas to turn healthy again", 0.5)
    assert stored(stack) >= expected
