"""Fixtures shared by the whole suite."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from devtools.kafka_broker import TansuBroker
from emitter.loadgen import EngineTruth, LoadSpec, run_load
from emitter.sinks import LocalLogSink
from schemas import StepEvent

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def step_event(outcomes: list[dict[str, Any]] | None = None, **envelope: Any) -> StepEvent:
    """A valid step event; keyword arguments override envelope fields."""
    fields: dict[str, Any] = {
        "event_id": "boot1-7", "engine_instance": "node-a", "dp_rank": 0, "model": "tiny-target",
        "vllm_version": "0.32.0", "method": "draft_model", "num_spec_tokens": 3, "drafter_max_len": 96,
        "step_index": 7, "event_time": T0, "batch_max_seq_len": 40,
        "outcomes": outcomes if outcomes is not None else [
            {"kind": "drafted", "request_id": "r1", "k_valid": 3, "accepted": 2, "emitted": 3},
            {"kind": "skipped_for_length", "request_id": "r2", "k_sched": 3, "k_valid": 3, "accepted": 0,
             "emitted": 1},
            {"kind": "grammar_invalid", "request_id": "r3", "k_sched": 3, "k_valid": 1, "k_invalid": 2,
             "accepted": 1, "emitted": 2},
            {"kind": "k_zero", "request_id": "r4", "reason": "no_proposal", "emitted": 1},
        ],
    }
    fields.update(envelope)
    return StepEvent.model_validate(fields)


def write_load(log_dir: Path, **spec_fields: Any) -> dict[str, EngineTruth]:
    """Run the load generator into a local log; returns its ground truth."""
    spec_fields.setdefault("start_time", T0)
    with LocalLogSink(log_dir) as sink:
        return run_load(LoadSpec(**spec_fields), sink)


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
