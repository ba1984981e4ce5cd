"""The live totals as Prometheus metric families, served over HTTP by prometheus_client.

Every family is declared in :mod:`ingest.metrics.families`; this module only fills them from a
:class:`~ingest.metrics.live.Snapshot` taken at scrape time.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ingest.metrics import families as f
from ingest.metrics.counts import GroupCounts, GroupKey, kind_and_reason
from ingest.metrics.live import LiveMetrics, Snapshot

#: Scalar families and the GroupCounts field each shows.
_GROUP_TOTALS = (
    (f.DRAFTS, "drafts"), (f.DRAFT_TOKENS, "draft_tokens"), (f.ACCEPTED_TOKENS, "accepted_tokens"),
    (f.VLLM_DRAFTS, "vllm_drafts"), (f.VLLM_DRAFT_TOKENS, "vllm_draft_tokens"),
    (f.VLLM_ACCEPTED_TOKENS, "vllm_accepted_tokens"), (f.EMITTED_TOKENS, "emitted_tokens"),
    (f.VERIFIED_SLOTS, "verified_slots"),
)
#: Per-position families and the GroupCounts list each shows.
_PER_POSITION = (
    (f.ACCEPTED_PER_POSITION, "accepted_per_pos"), (f.REACHED_PER_POSITION, "reached_per_pos"),
    (f.VLLM_ACCEPTED_PER_POSITION, "vllm_accepted_per_pos"),
)


class LiveCollector(Collector):
    """Collects :class:`LiveMetrics` at each scrape."""

    def __init__(self, live: LiveMetrics) -> None:
        self._live = live

    def collect(self) -> Iterator[Metric]:
        snapshot = self._live.snapshot()
        yield from group_families(snapshot)
        yield from _health_families(snapshot)


def _new(family: f.Family) -> CounterMetricFamily | GaugeMetricFamily:
    kind = CounterMetricFamily if family.type == "counter" else GaugeMetricFamily
    return kind(family.name, family.help, labels=family.labels)


def _labels(key: GroupKey) -> list[str]:
    model, engine, method, k = key
    return [model, engine, method, str(k)]


def group_families(snapshot: Snapshot) -> Iterator[Metric]:
    groups: list[tuple[GroupKey, GroupCounts]] = sorted(snapshot.groups.items())
    for family, name in _GROUP_TOTALS:
        metric = _new(family)
        for key, counts in groups:
            metric.add_metric(_labels(key), getattr(counts, name))
        yield metric
    for family, name in _PER_POSITION:
        metric = _new(family)
        for key, counts in groups:
            for position, value in enumerate(getattr(counts, name)):
                metric.add_metric([*_labels(key), str(position)], value)
        yield metric
    steps, wasted, last = _new(f.REQUEST_STEPS), _new(f.WASTED_SLOTS), _new(f.LAST_EVENT_TIME)
    for key, counts in groups:
        for code, value in sorted(counts.request_steps.items()):
            steps.add_metric([*_labels(key), *kind_and_reason(code)], value)
        wasted.add_metric([*_labels(key), "placeholder"], counts.placeholder_slots)
        wasted.add_metric([*_labels(key), "pad"], counts.pad_slots)
        last.add_metric(_labels(key), counts.last_event_us / 1e6)
    dropped = _new(f.PLUGIN_DROPPED_STEPS)
    for key, value in sorted(snapshot.plugin_dropped.items()):
        dropped.add_metric(_labels(key), value)
    yield from (steps, wasted, last, dropped)


def _health_families(snapshot: Snapshot) -> Iterator[Metric]:
    health = snapshot.health
    for family, value in ((f.INGEST_STEPS, health.steps), (f.INGEST_ROWS, health.request_steps),
                          (f.INGEST_DEAD_LETTERS, health.dead_letters), (f.INGEST_LOST_OFFSETS, health.lost_offsets)):
        metric = _new(family)
        metric.add_metric([], value)
        yield metric
    lag = _new(f.INGEST_LAG)
    for (source, partition), records in sorted(health.lag.items()):
        lag.add_metric([source, str(partition)], records)
    yield lag


class MetricsServer:
    """The HTTP endpoint (``/metrics``) of one :class:`LiveMetrics`, on a daemon thread."""

    def __init__(self, live: LiveMetrics, port: int, host: str = "0.0.0.0") -> None:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(LiveCollector(live))
        server, thread = start_http_server(port, host, registry=registry)
        self._server: WSGIServer = server
        self._thread: threading.Thread = thread

    @property
    def port(self) -> int:
        """The port it listens on (the one chosen when asked for 0)."""
        return int(self._server.server_port)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
