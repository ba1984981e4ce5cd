"""The plugin never hurts the engine: with a failing sink, a full disk or a stalled sink,
vLLM generates exactly what it generates without the plugin, and the drops are reported."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.ingest import ingest_once, read_rows
from tests.support.vllm import Run

ENGINE = "draft_model"


def fault_run(root: Path, model_cache: Path, sink: str, **env: str) -> tuple[Run, dict[str, Any]]:
    health = root / "health.json"
    run = Run(root, model_cache, ENGINE, ingest=False, SPECMETRICS_SINK=sink, SPECMETRICS_HEALTH_FILE=str(health),
              SPECMETRICS_HEALTH_INTERVAL_S="0.5", VLLM_ENABLE_V1_MULTIPROCESSING="0", **env)
    return run, json.loads(health.read_text())


def outputs(run: Run) -> dict[str, list[list[int]]]:
    return {name: scenario["outputs"] for name, scenario in run.scenarios.items()}


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> Run:
    return Run(tmp_path_factory.mktemp("no-plugin"), model_cache, ENGINE, SPECMETRICS_SINK="",
               VLLM_ENABLE_V1_MULTIPROCESSING="0")


def test_without_a_sink_the_plugin_records_nothing(baseline: Run) -> None:
    assert "SPECMETRICS_SINK is not set; the plugin records nothing" in baseline.vllm_log
    assert not baseline.log.exists()
    assert baseline.scenarios["draft_model/fits"]["vllm"]["num_drafts"] > 0


def test_a_failing_sink_drops_and_counts_and_vllm_is_unaffected(
    tmp_path: Path, model_cache: Path, baseline: Run
) -> None:
    (tmp_path / "not-a-dir").write_text("a file where the log directory should be")
    run, health = fault_run(tmp_path, model_cache, (tmp_path / "not-a-dir" / "log").as_uri())
    assert outputs(run) == outputs(baseline)
    assert health["published_steps"] > 0
    assert health["dropped_sink_error"] + health["empty_steps"] == health["published_steps"]
    assert health["sent_steps"] == 0 and health["dropped_sink_error"] > 0
    assert "specmetrics: the sink failed (NotADirectoryError" in run.vllm_log


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_a_full_disk_keeps_what_was_written_and_vllm_is_unaffected(
    tmp_path: Path, model_cache: Path, baseline: Run, small_disk: Path
) -> None:
    # Small batches, so the disk (8 KiB, about half of the run's events) fills part way through.
    run, health = fault_run(tmp_path, model_cache, (small_disk / "log").as_uri(), SPECMETRICS_BATCH_STEPS="4",
                            SPECMETRICS_FLUSH_INTERVAL_MS="20")
    assert outputs(run) == outputs(baseline)
    assert health["sent_steps"] > 0 and health["dropped_sink_error"] > 0
    assert health["sent_steps"] + health["dropped_sink_error"] + health["empty_steps"] == health["published_steps"]
    assert "No space left on device" in run.vllm_log
    stats = ingest_once(small_disk / "log", tmp_path / "data")  # what reached the disk is intact
    assert stats.dead_letters == 0
    assert len(set(read_rows(tmp_path / "data")["event_id"].to_pylist())) == health["sent_steps"]


def test_a_stalled_sink_fills_the_queue_drops_and_never_blocks(
    tmp_path: Path, model_cache: Path, baseline: Run
) -> None:
    log = tmp_path / "log"
    log.mkdir()
    os.mkfifo(log / "00000000000000000000.log")  # reading it blocks forever: the sink hangs
    run, health = fault_run(tmp_path, model_cache, log.as_uri(), SPECMETRICS_QUEUE_STEPS="4")
    assert outputs(run) == outputs(baseline)
    assert health["dropped_queue_full"] > 0
    assert health["sent_steps"] == 0
    assert health["published_steps"] + health["dropped_queue_full"] > 4 + health["dropped_queue_full"]
    assert "the sink is stalled" in run.vllm_log
