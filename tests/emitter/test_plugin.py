"""The plugin's publisher: one per engine-core process, named so data-parallel ranks never share."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specmetrics.emitter import plugin
from specmetrics.emitter.settings import EmitterSettings


@pytest.mark.parametrize(("dp_rank", "suffix"), [(0, ""), (2, "-dp2")])
def test_each_data_parallel_rank_has_its_own_spool_folder_and_health_file(
    kafka_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dp_rank: int, suffix: str
) -> None:
    settings = EmitterSettings(sink=kafka_url, engine_label="vllm-0", health_file=tmp_path / "health.json")
    monkeypatch.setattr(plugin, "_state", plugin._PluginState(settings=settings))
    publisher = plugin.publisher(dp_rank)
    try:
        sink = publisher._open_sink()  # what the publisher's thread opens on its first batch
        sink.close()
    finally:
        plugin.flush()
    topic = kafka_url.rsplit("/", 1)[1]
    assert [p.name for p in (tmp_path / "spool").iterdir()] == [f"{topic}-vllm-0{suffix}"]
    assert json.loads((tmp_path / f"health{suffix}.json").read_text())["dropped_queue_full"] == 0
    assert not (tmp_path / ("health.json" if suffix else "health-dp2.json")).exists()


def test_the_publisher_closes_when_the_last_engine_core_of_the_process_shuts_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two engines in one process (in-process engine cores): the first one's shutdown must not close
    the publisher the other still publishes into; after the last one, a late step is counted."""
    settings = EmitterSettings(sink=(tmp_path / "log").as_uri(), flush_interval_ms=10)
    monkeypatch.setattr(plugin, "_state", plugin._PluginState(settings=settings))
    first, second = plugin.attach(), plugin.attach()
    assert first is second
    plugin.detach()
    first.publish(1)  # the second engine goes on
    plugin.detach()
    first.publish(2)
    assert (first.health.published_steps, first.health.dropped_at_close) == (1, 1)
    assert plugin._state.publisher is None
