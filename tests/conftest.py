"""Fixtures shared by the whole suite."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devtools.kafka_broker import TansuBroker
from devtools.s3_server import SeaweedS3


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "log"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[TansuBroker]:
    """The suite's broker (tests that restart a broker start their own)."""
    with TansuBroker() as broker:
        yield broker


@pytest.fixture(scope="session")
def s3_server() -> Iterator[SeaweedS3]:
    """The suite's S3 server (SeaweedFS; tests that restart one start their own)."""
    with SeaweedS3() as server:
        yield server


@pytest.fixture
def s3_url(s3_server: SeaweedS3, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh bucket on the suite's S3 server, and the writer's settings in the environment."""
    bucket = f"specmetrics-{uuid.uuid4().hex[:8]}"
    s3_server.create_bucket(bucket)
    for name, value in s3_server.environment().items():
        monkeypatch.setenv(name, value)
    return f"s3://{bucket}/data"


@pytest.fixture
def kafka_url(kafka_broker: TansuBroker) -> str:
    """A fresh topic on the suite's broker."""
    return kafka_broker.url(f"steps-{uuid.uuid4().hex[:8]}")


@pytest.fixture(autouse=True)
def kafka_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Kafka settings for tests: spool under the test's folder, fast group joins (Tansu takes about
    half the session timeout to join a group), and a consumer group of its own: on the shared
    broker, Tansu can leave a later join of a group whose earlier members were killed waiting
    forever."""
    monkeypatch.setenv("SPECMETRICS_KAFKA_SPOOL_DIR", str(tmp_path / "spool"))
    monkeypatch.setenv("SPECMETRICS_INGEST_GROUP", f"ingest-{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv("SPECMETRICS_KAFKA_SESSION_TIMEOUT_MS", "6000")
    monkeypatch.setenv("SPECMETRICS_KAFKA_HEARTBEAT_INTERVAL_MS", "2000")
    monkeypatch.setenv("SPECMETRICS_KAFKA_TOPIC_PARTITIONS", "3")
    # Tansu's group never forms again after the leader of a forming group sends LeaveGroup.
    monkeypatch.setenv("SPECMETRICS_KAFKA_LEAVE_GROUP_ON_CLOSE", "false")


#: The modules whose tests run on the Docker engine (the fixture docker_engine): under pytest-xdist one
#: worker runs them all, one after the other (one engine, one image cache, one compose project at a time).
ON_DOCKER = frozenset(f"tests/deploy/{name}.py" for name in (
    "test_drift_alert", "test_engine_s3", "test_engine_stack", "test_engine_vllm"))


#: The work handed out first, longest first (measured on two workers, 2026-12-07): the Docker modules
#: (about 8 min together), the first real-vLLM runs, then the modules of 45-165 s; the many short
#: modules after them, in the order collected, so the run does not end with one worker on a long module
#: and the other idle.
LONGEST_FIRST = ("docker", *(f"tests/{name}.py" for name in (
    "emitter/vllm/test_plugin_end_to_end", "ingest/sources/test_kafka", "emitter/vllm/test_releases",
    "emitter/vllm/test_plugin_faults", "test_any_valid_event", "ingest/test_s3", "benchmarks/test_benchmark_arguments",
    "reports/test_report_rollups", "ingest/test_chaos_soak", "ingest/test_fault_injection_kafka")))
if stale := [module for module in LONGEST_FIRST[1:] if not (Path(__file__).parents[1] / module).is_file()]:
    raise pytest.UsageError(f"LONGEST_FIRST in tests/conftest.py names modules that do not exist: {stale}")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``make test`` runs the suite on two workers (pytest-xdist): each module's tests on one worker, so
    its fixtures start once, and the modules of :data:`ON_DOCKER` on the same one ("docker"); the work
    of :data:`LONGEST_FIRST` first, the rest in the order collected."""
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "docker" if module in ON_DOCKER else module

        def _assign_work_unit(self, node: Any) -> None:
            for scope in reversed(LONGEST_FIRST):  # the queue is complete by the first assignment
                if scope in self.workqueue:
                    self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    config.option.loadscopereorder = False
    return ByModule(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every module of a test that needs the Docker engine is in :data:`ON_DOCKER`."""
    if missing := sorted({item.nodeid.split("::", 1)[0] for item in items
                          if "docker_engine" in getattr(item, "fixturenames", ())} - ON_DOCKER):
        raise pytest.UsageError(f"{', '.join(missing)} use(s) the Docker engine: add to ON_DOCKER in tests/conftest.py")
