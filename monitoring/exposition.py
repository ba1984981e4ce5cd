"""The live totals as Prometheus metric families, served over HTTP by prometheus_client.

Every family is declared in :mod:`monitoring.families`. At scrape time this module takes a
:class:`~monitoring.live.Snapshot`, has :mod:`queries.live` compute every group's counters from its
histogram with the views' SQL, and fills the families.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from specmetrics.monitoring import families as f
from specmetrics.monitoring.histogram import GroupKey
from specmetrics.monitoring.live import LiveMetrics, Snapshot
from specmetrics.queries.live import GroupTotals, LiveTotals

logger = logging.getLogger(__name__)

#: Scalar families and the GroupTotals field each shows.
_GROUP_TOTALS = (
    (f.DRAFTS, "num_drafts"), (f.DRAFT_TOKENS, "num_draft_tokens"), (f.ACCEPTED_TOKENS, "num_accepted_tokens"),
    (f.VLLM_DRAFTS, "vllm_num_drafts"), (f.VLLM_DRAFT_TOKENS, "vllm_num_draft_tokens"),
    (f.VLLM_ACCEPTED_TOKENS, "vllm_num_accepted_tokens"), (f.EMITTED_TOKENS, "emitted_tokens"),
    (f.VERIFIED_SLOTS, "verified_slots"),
)
#: Per-position families and the GroupTotals list each shows.
_PER_POSITION = (
    (f.ACCEPTED_PER_POSITION, "num_accepted_per_position"), (f.REACHED_PER_POSITION, "num_reached_per_position"),
    (f.VLLM_ACCEPTED_PER_POSITION, "vllm_num_accepted_per_position"),
)


class LiveCollector(Collector):
    """Collects :class:`LiveMetrics` at each scrape (one scrape at a time). The pipeline's health
    is always shown; should the views' SQL fail, the request-step families are left out of that
    scrape and the error is logged."""

    def __init__(self, live: LiveMetrics) -> None:
        self._live = live
        self._lock = threading.Lock()
        self._totals: LiveTotals | None = LiveTotals()

    def collect(self) -> Iterator[Metric]:
        snapshot = self._live.snapshot()
        yield from _health_families(snapshot)
        with self._lock:
            if self._totals is None:  # closed: the process is stopping
                return
            try:
                totals = self._totals.totals(snapshot.histogram())
            except Exception:
                logger.exception("the live totals could not be computed; this scrape shows the pipeline's health only")
                return
        yield from group_families(totals, snapshot)

    def close(self) -> None:
        with self._lock:
            if self._totals is not None:
                self._totals.close()
                self._totals = None


def _new(family: f.Family) -> CounterMetricFamily | GaugeMetricFamily:
    kind = CounterMetricFamily if family.type == "counter" else GaugeMetricFamily
    return kind(family.name, family.help, labels=family.labels)


def _labels(key: GroupKey) -> list[str]:
    """The values of :data:`~monitoring.families.GROUP_LABELS` for a group."""
    engine, model, method, k = key
    return [model, engine, method, str(k)]


def group_families(totals: list[GroupTotals], snapshot: Snapshot) -> Iterator[Metric]:
    """The request-step families: the counters of each group's ``totals``, its freshness and its
    plugin's dropped steps from ``snapshot``."""
    keyed = [(_labels((row.engine_id, row.model, row.method, row.num_spec_tokens)), row) for row in totals]
    for family, name in _GROUP_TOTALS:
        metric = _new(family)
        for labels, row in keyed:
            metric.add_metric(labels, getattr(row, name))
        yield metric
    for family, name in _PER_POSITION:
        metric = _new(family)
        for labels, row in keyed:
            for position, value in enumerate(getattr(row, name)):
                metric.add_metric([*labels, str(position)], value)
        yield metric
    steps, wasted = _new(f.REQUEST_STEPS), _new(f.WASTED_SLOTS)
    for labels, row in keyed:
        for count in row.request_steps:
            steps.add_metric([*labels, count.kind, count.k_zero_reason or ""], count.request_steps)
        wasted.add_metric([*labels, "placeholder"], row.placeholder_slots)
        wasted.add_metric([*labels, "pad"], row.pad_slots)
    last, dropped = _new(f.LAST_EVENT_TIME), _new(f.PLUGIN_DROPPED_STEPS)
    for key, us in sorted(snapshot.last_event_us.items()):
        last.add_metric(_labels(key), us / 1e6)
    for key, value in sorted(snapshot.plugin_dropped.items()):
        dropped.add_metric(_labels(key), value)
    served, capped_from = _new(f.MAX_MODEL_LEN), _new(f.CONTEXT_CAP_FROM)
    for key, (length, before) in sorted(snapshot.context.items()):
        served.add_metric(_labels(key), length)
        if before is not None:
            capped_from.add_metric(_labels(key), before)
    yield from (steps, wasted, last, dropped, served, capped_from)
    yield from _vllm_own_families(snapshot)


def _vllm_own_families(snapshot: Snapshot) -> Iterator[Metric]:
    """vLLM's own counters as the steps carried them, and the steps that carried none."""
    families = {name: _new(family) for name, family in (
        ("drafts", f.VLLM_OWN_DRAFTS), ("draft_tokens", f.VLLM_OWN_DRAFT_TOKENS),
        ("accepted_tokens", f.VLLM_OWN_ACCEPTED_TOKENS))}
    per_position, missing = _new(f.VLLM_OWN_ACCEPTED_PER_POSITION), _new(f.VLLM_COUNTS_MISSING)
    for key, own in sorted(snapshot.vllm_own.items()):
        for name, metric in families.items():
            metric.add_metric(_labels(key), getattr(own, name))
        for position, value in enumerate(own.accepted_per_pos):
            per_position.add_metric([*_labels(key), str(position)], value)
    for (key, reason), steps in sorted(snapshot.vllm_missing.items()):
        missing.add_metric([*_labels(key), reason], steps)
    yield from (*families.values(), per_position, missing)
    only = {name: _new(family) for name, family in (
        ("steps", f.VLLM_ONLY_STEPS), ("drafts", f.VLLM_ONLY_DRAFTS), ("draft_tokens", f.VLLM_ONLY_DRAFT_TOKENS),
        ("accepted_tokens", f.VLLM_ONLY_ACCEPTED_TOKENS))}
    for (key, reason), (steps, counts) in sorted(snapshot.vllm_only.items()):
        only["steps"].add_metric([*_labels(key), reason], steps)
        for name in ("drafts", "draft_tokens", "accepted_tokens"):
            only[name].add_metric([*_labels(key), reason], getattr(counts, name))
    yield from only.values()


def _health_families(snapshot: Snapshot) -> Iterator[Metric]:
    health = snapshot.health
    for family, value in ((f.INGEST_STEPS, health.steps), (f.INGEST_ROWS, health.request_steps),
                          (f.INGEST_DEAD_LETTERS, health.dead_letters), (f.INGEST_DUPLICATE_STEPS,
                                                                         health.duplicate_steps),
                          (f.INGEST_LOST_OFFSETS, health.lost_offsets)):
        metric = _new(family)
        metric.add_metric([], value)
        yield metric
    lag = _new(f.INGEST_LAG)
    for (source, partition), records in sorted(health.lag.items()):
        lag.add_metric([source, str(partition)], records)
    yield lag
    stalled = _new(f.INGEST_STALLED)
    for source, seconds in sorted(health.stalled.items()):
        stalled.add_metric([source], seconds)
    yield stalled


class MetricsServer:
    """The HTTP endpoint (``/metrics``) of one :class:`LiveMetrics`, on a daemon thread."""

    def __init__(self, live: LiveMetrics, port: int, host: str = "0.0.0.0") -> None:
        registry = CollectorRegistry(auto_describe=False)
        self._collector = LiveCollector(live)
        registry.register(self._collector)
        try:
            server, thread = start_http_server(port, host, registry=registry)
        except BaseException:
            self._collector.close()
            raise
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
        self._collector.close()
