"""Running totals of what one ingester validated: the state behind the live endpoint.

:class:`LiveMetrics` is an :class:`~ingest.observer.IngestObserver`: on the ingester's polling
thread it adds every batch of validated rows to a histogram of request-steps by group and outcome
shape (:mod:`monitoring.histogram`), and hands a consistent copy to the endpoint's thread. The
histogram is bounded by the groups and their shapes, never by the rows. Per source and partition it
keeps the next offset it has not counted, so what the ingester reads again in this process (its
source reconnected, a partition came back) is not counted twice. What another process counted
(before a restart, or the partition's previous owner in a consumer group) it cannot know:
docs/metrics.md says what that bounds.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from specmetrics.ingest.observer import IngestObserver, ValidatedSteps
from specmetrics.monitoring.histogram import BatchCounts, GroupKey, Shape, count_batch
from specmetrics.queries.live import LIVE_HISTOGRAM_SCHEMA
from specmetrics.schemas.events import OutcomeKind, VllmCountsMissing, VllmOnlyReason
from specmetrics.schemas.wire import VllmCountTuple


@dataclass
class PipelineHealth:
    """The ingester's own counters, as the endpoint shows them."""

    steps: int = 0
    request_steps: int = 0
    dead_letters: int = 0
    duplicate_steps: int = 0  # of the dead letters, copies of steps read before
    lost_offsets: int = 0
    #: Per (source, partition): records not read yet.
    lag: dict[tuple[str, int], int] = field(default_factory=dict)
    #: Per source: seconds the ingester has had work it does not do (ingest.ingester.Ingester.stalled_s).
    stalled: dict[str, float] = field(default_factory=dict)


@dataclass
class VllmOwn:
    """vLLM's own counters of one group, summed over its steps."""

    drafts: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)

    def add(self, drafts: int, draft_tokens: int, accepted_tokens: int, per_pos: tuple[int, ...]) -> None:
        self.drafts += drafts
        self.draft_tokens += draft_tokens
        self.accepted_tokens += accepted_tokens
        if len(per_pos) > len(self.accepted_per_pos):
            self.accepted_per_pos += [0] * (len(per_pos) - len(self.accepted_per_pos))
        for position, count in enumerate(per_pos):
            self.accepted_per_pos[position] += count


@dataclass
class Snapshot:
    """A consistent copy of every total, for one scrape."""

    #: Per group and outcome shape: request-steps and the tokens they emitted.
    shapes: dict[Shape, tuple[int, int]]
    #: Per group: the latest event time counted, µs since the epoch.
    last_event_us: dict[GroupKey, int]
    #: Per group: the dropped steps its plugin process reported last (absent: never reported).
    plugin_dropped: dict[GroupKey, int]
    #: Per group: the target's max model length as served, and before vLLM lowered it to the drafter's
    #: (None: not lowered), as its latest step event reports them (absent: never reported).
    context: dict[GroupKey, tuple[int, int | None]]
    health: PipelineHealth
    #: Per group: vLLM's own counters summed over the steps that carried them (drafts, draft tokens,
    #: accepted tokens, accepted per position).
    vllm_own: dict[GroupKey, VllmOwn] = field(default_factory=dict)
    #: Per group and reason: steps without vLLM's own counters.
    vllm_missing: dict[tuple[GroupKey, str], int] = field(default_factory=dict)
    #: Per group and reason: the steps recorded with vLLM's own counters only (schema 1.8), and those counters.
    vllm_only: dict[tuple[GroupKey, str], tuple[int, VllmOwn]] = field(default_factory=dict)

    def histogram(self) -> pa.Table:
        """The shapes as the table :mod:`queries.live` reads (:data:`~queries.live.LIVE_HISTOGRAM_SCHEMA`)."""
        names = LIVE_HISTOGRAM_SCHEMA.names
        rows = [(*shape, steps, emitted) for shape, (steps, emitted) in self.shapes.items()]
        columns = list(zip(*rows, strict=True)) if rows else [() for _ in names]
        return pa.table(dict(zip(names, map(list, columns), strict=True)), schema=LIVE_HISTOGRAM_SCHEMA)


class LiveMetrics(IngestObserver):
    """Totals since this process started; safe to read from another thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._shapes: dict[Shape, tuple[int, int]] = {}
        self._last_event_us: dict[GroupKey, int] = {}
        self._plugin_dropped: dict[GroupKey, int] = {}
        self._context: dict[GroupKey, tuple[int, int | None]] = {}
        self._vllm_own: dict[GroupKey, VllmOwn] = {}
        self._vllm_missing: dict[tuple[GroupKey, str], int] = {}
        self._vllm_only: dict[tuple[GroupKey, str], tuple[int, VllmOwn]] = {}
        self._health = PipelineHealth()
        self._next: dict[tuple[str, int], int] = {}  # per (source, partition): the first offset not counted

    def validated(self, source: str, steps: ValidatedSteps) -> None:
        position = (source, steps.partition)
        floor = self._next.get(position, 0)
        new_steps = steps.step_offsets >= floor
        rows = steps.rows
        if rows is not None and not new_steps.all():
            rows = rows.filter(rows.column("log_offset").to_numpy() >= floor)
        if rows is not None and any(step.vllm_only is not None for step in steps.steps):
            rows = rows.filter(pc.not_equal(rows.column("kind").cast(pa.string()), OutcomeKind.VLLM_ONLY.value))
        counts = count_batch(rows) if rows is not None else BatchCounts({}, {})
        dropped, context, own = _step_reports(steps, new_steps)
        dead_letters = sum(offset >= floor for offset in steps.dead_letter_offsets)
        duplicates = sum(offset >= floor for offset in steps.duplicate_offsets)
        end = max([*steps.step_offsets[-1:].tolist(), *steps.dead_letter_offsets], default=floor - 1)
        with self._lock:
            for shape, (n, emitted) in counts.shapes.items():
                before = self._shapes.get(shape, (0, 0))
                self._shapes[shape] = (before[0] + n, before[1] + emitted)
            for key, us in counts.last_event_us.items():
                self._last_event_us[key] = max(us, self._last_event_us.get(key, us))
            self._plugin_dropped.update(dropped)
            self._context.update(context)
            for key, vllm, only in own:
                if only is not None and isinstance(vllm, tuple):
                    steps_before, counts_before = self._vllm_only.get((key, only.value), (0, VllmOwn()))
                    counts_before.add(*vllm)
                    self._vllm_only[(key, only.value)] = (steps_before + 1, counts_before)
                elif vllm is None or isinstance(vllm, VllmCountsMissing):
                    missing = (key, "unreported" if vllm is None else vllm.value)
                    self._vllm_missing[missing] = self._vllm_missing.get(missing, 0) + 1
                else:
                    self._vllm_own.setdefault(key, VllmOwn()).add(*vllm)
            self._health.steps += int(new_steps.sum())
            self._health.request_steps += 0 if rows is None else len(rows)
            self._health.dead_letters += dead_letters
            self._health.duplicate_steps += duplicates
            self._next[position] = max(floor, end + 1)

    def lost(self, source: str, partition: int, first: int, last: int) -> None:
        position = (source, partition)
        floor = self._next.get(position, 0)
        with self._lock:
            self._health.lost_offsets += max(0, last + 1 - max(first, floor))
            self._next[position] = max(floor, last + 1)

    def lag(self, source: str, records: dict[int, int]) -> None:
        with self._lock:
            self._health.lag = {key: value for key, value in self._health.lag.items() if key[0] != source}
            self._health.lag.update({(source, partition): lag for partition, lag in records.items()})

    def stalled(self, source: str, seconds: float) -> None:
        with self._lock:
            self._health.stalled[source] = seconds

    def snapshot(self) -> Snapshot:
        with self._lock:
            health = PipelineHealth(self._health.steps, self._health.request_steps, self._health.dead_letters,
                                    self._health.duplicate_steps, self._health.lost_offsets, dict(self._health.lag),
                                    dict(self._health.stalled))
            own = {key: VllmOwn(c.drafts, c.draft_tokens, c.accepted_tokens, list(c.accepted_per_pos))
                   for key, c in self._vllm_own.items()}
            only = {key: (n, VllmOwn(c.drafts, c.draft_tokens, c.accepted_tokens, list(c.accepted_per_pos)))
                    for key, (n, c) in self._vllm_only.items()}
            return Snapshot(dict(self._shapes), dict(self._last_event_us), dict(self._plugin_dropped),
                            dict(self._context), health, own, dict(self._vllm_missing), only)


def _step_reports(steps: ValidatedSteps, new_steps: np.ndarray) -> tuple[
        dict[GroupKey, int], dict[GroupKey, tuple[int, int | None]],
        list[tuple[GroupKey, VllmCountTuple | VllmCountsMissing | None, VllmOnlyReason | None]]]:
    """What the new steps report, per group: the dropped steps and the context served and before
    the cap of its latest step (each where reported), and vLLM's own counters of every step, with
    why the step has nothing else (a vLLM-only step)."""
    dropped: dict[GroupKey, int] = {}
    served: dict[GroupKey, tuple[int, int | None]] = {}
    own: list[tuple[GroupKey, VllmCountTuple | VllmCountsMissing | None, VllmOnlyReason | None]] = []
    keys: dict[int, GroupKey] = {}  # per engine context object (decoding shares them)
    for step, new in zip(steps.steps, new_steps.tolist(), strict=True):
        if not new:
            continue
        context = step.context
        key = keys.get(id(context))
        if key is None:
            key = keys[id(context)] = (context.engine_id, context.model, context.method, context.num_spec_tokens)
        own.append((key, step.vllm_counts, step.vllm_only))
        if step.dropped_steps is not None:
            dropped[key] = step.dropped_steps
        if context.max_model_len is not None:
            served[key] = (context.max_model_len, context.context_cap_from)
    return dropped, served, own
