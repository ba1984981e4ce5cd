"""The drift alert of alerts.yml on a real Prometheus (docker-compose.yml's image, or its stand-in):
Prometheus scrapes a real ``specmetrics ingest`` while steps whose vLLM counters differ from the
plugin's outcomes arrive for one engine, and the rule fires for that engine only."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools.ports import free_port
from specmetrics.emitter.sinks import LocalLogSink
from specmetrics.schemas.events import VllmCounts
from specmetrics.schemas.wire import step_event_to_wire
from tests.support.docker_engine import docker, prometheus_image
from tests.support.events import step_event
from tests.support.http import prometheus_api as api
from tests.support.metrics import scrape, wait_for

ROOT = Path(__file__).resolve().parents[2]
ALERTS_FILE = ROOT / "docker" / "monitoring" / "prometheus" / "alerts.yml"
ALERT = "SpecmetricsVllmCountingDrift"
#: What vLLM counts of the default test step (tests/support/events.py): 3 drafts of 7 tokens, 3 accepted.
EQUAL = VllmCounts(num_drafts=3, num_draft_tokens=7, num_accepted_tokens=3, num_accepted_tokens_per_pos=[2, 1, 0])
DRIFTED = EQUAL.model_copy(update={"num_draft_tokens": 6})  # vLLM counted one draft token less


def send(log: Path, start: int, counts: dict[str, VllmCounts]) -> None:
    """Four steps per engine instance, from step ``start`` on, with the given vLLM counters."""
    with LocalLogSink(log) as sink:
        for instance, own in counts.items():
            sink.send(instance.encode(), [step_event_to_wire(step_event(
                engine_instance=instance, event_id=f"{instance}-{i}", step_index=i, vllm_counts=own))
                for i in range(start, start + 4)])


@pytest.fixture
def ingester(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    log, port = tmp_path / "log", free_port()
    with LocalLogSink(log):  # an empty log, followed
        pass
    process = subprocess.Popen(
        [sys.executable, "-m", "specmetrics.cli", "ingest", "--source", log.as_uri(), "--out", str(tmp_path / "out"),
         "--quiet", "--metrics-port", str(port)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT),
                              "SPECMETRICS_INGEST_METRICS_HOST": "127.0.0.1"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        yield log, port
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
        assert process.returncode == 0, err.decode()


@pytest.fixture
def prometheus(docker_engine: None, ingester: tuple[Path, int], tmp_path: Path) -> Iterator[int]:
    """Prometheus on the host's network, scraping the ingester each second and evaluating alerts.yml
    as shipped, and its drift rule once more with ``for`` cut to 1 s (the shipped rule waits 5 m)."""
    config, port = tmp_path / "prometheus", free_port()
    config.mkdir(mode=0o755)
    rules = yaml.safe_load(ALERTS_FILE.read_text())
    rule = next(r for group in rules["groups"] for r in group["rules"] if r.get("alert") == ALERT)
    (config / "alerts.yml").write_text(ALERTS_FILE.read_text())
    (config / "now.yml").write_text(yaml.safe_dump({"groups": [{"name": "now", "rules": [{**rule, "for": "1s"}]}]}))
    (config / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": ["/etc/prometheus/alerts.yml", "/etc/prometheus/now.yml"],
        "scrape_configs": [{"job_name": "specmetrics-ingest",
                            "static_configs": [{"targets": [f"127.0.0.1:{ingester[1]}"]}]}]}))
    for file in config.iterdir():
        file.chmod(0o644)
    name = f"specmetrics-drift-{port}"
    docker("run", "--detach", "--rm", "--name", name, "--network", "host", "--volume",
           f"{config}:/etc/prometheus:ro", prometheus_image(), "--config.file=/etc/prometheus/prometheus.yml",
           "--storage.tsdb.path=/prometheus", f"--web.listen-address=127.0.0.1:{port}")
    try:
        wait_for(lambda: ready(port), 60, "Prometheus to answer", 0.5)
        yield port
    finally:
        docker("rm", "--force", name, check=False)


def ready(port: int) -> bool:
    try:
        return bool(api(port, "/api/v1/targets")["activeTargets"][0]["health"] == "up")
    except (OSError, AssertionError, IndexError, json.JSONDecodeError):
        return False


def alerts(port: int) -> list[dict[str, Any]]:
    return [alert for alert in api(port, "/api/v1/alerts")["alerts"] if alert["labels"]["alertname"] == ALERT]


def test_vllm_counting_differently_fires_the_drift_alert_for_that_engine_only(
        prometheus: int, ingester: tuple[Path, int]) -> None:
    log, ingest_port = ingester
    send(log, 0, {"node-a": EQUAL, "node-b": EQUAL})  # the series begin, equal: nothing to fire
    series = "specmetrics_vllm_own_spec_decode_draft_tokens_total"
    own = (series, (("engine", "node-a/dp0"), ("method", "draft_model"), ("model_name", "tiny-target"),
                    ("num_spec_tokens", "3")))
    wait_for(lambda: scrape(ingest_port).get(own) == 4 * 7, 60, "the first steps counted")
    wait_for(lambda: len(api(prometheus, "/api/v1/query", query=series)["result"]) == 2, 60, "both engines scraped",
             0.5)
    assert alerts(prometheus) == []

    send(log, 4, {"node-a": DRIFTED, "node-b": EQUAL})
    wait_for(lambda: {a["state"] for a in alerts(prometheus)} == {"pending", "firing"}, 60,
             "the shipped rule pending and the 1-second one firing", 0.5)
    fired = alerts(prometheus)
    assert {(a["labels"]["engine"], a["labels"]["severity"]) for a in fired} == {("node-a/dp0", "critical")}
    assert all(a["annotations"]["summary"].startswith("node-a/dp0: the plugin's model of vLLM's counting drifted")
               for a in fired)
