"""Request-steps of one batch counted by outcome shape: the only arithmetic of the live metrics.

A shape is a row of the group and outcome columns of the views' ``outcome_histogram``. Counting
shapes defines no metric: what they add up to is computed from the histogram by the views' own SQL
(:mod:`queries.live`), so the endpoint and the views share one definition of every metric. The
shapes are few (a group's kinds, reasons and counts up to K), so a batch of any size becomes a
short list.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: A group of request-steps: (engine_id, model, method, num_spec_tokens), the views' group.
GroupKey = tuple[str, str, str, int]
#: A group and an outcome shape: GroupKey + (kind, k_zero_reason, k_sched, k_valid, k_invalid, accepted).
Shape = tuple[str, str, str, int, str, str | None, int, int, int, int]

_STRING_COLUMNS = ("engine_id", "model", "method")
_OUTCOME_COLUMNS = ("k_sched", "k_valid", "k_invalid", "accepted")
#: The columns of a Shape, in its order.
SHAPE_COLUMNS = (*_STRING_COLUMNS, "num_spec_tokens", "kind", "k_zero_reason", *_OUTCOME_COLUMNS)
#: Combinations of the columns' values counted with a dense histogram in one pass, rather than a
#: sort: up to this many, or twice the rows.
_DENSE_BINS = 1 << 16


@dataclass(frozen=True, slots=True)
class BatchCounts:
    """What one batch adds to the live totals."""

    #: Per shape: the request-steps and the tokens they emitted.
    shapes: dict[Shape, tuple[int, int]]
    #: Per group: the latest event time, µs since the epoch.
    last_event_us: dict[GroupKey, int]


def count_batch(batch: pa.RecordBatch | pa.Table) -> BatchCounts:
    """The shapes and the latest event time per group of ``batch``'s rows (columns of
    :data:`schemas.arrow.REQUEST_STEP_SCHEMA`); each column is read once."""
    if not len(batch):
        return BatchCounts({}, {})
    group = [*(_dictionary(batch.column(name)) for name in _STRING_COLUMNS), _integers(batch.column("num_spec_tokens"))]
    outcome = [_dictionary(batch.column("kind")), _dictionary(batch.column("k_zero_reason")),
               *(_integers(batch.column(name)) for name in _OUTCOME_COLUMNS)]
    return BatchCounts(_shapes(batch, [*group, *outcome]), _last_event_us(batch, group))


def _shapes(batch: pa.RecordBatch | pa.Table, columns: list[tuple[np.ndarray, list[object]]]
            ) -> dict[Shape, tuple[int, int]]:
    distinct, inverse = _distinct([codes for codes, _ in columns], [len(values) for _, values in columns])
    steps = np.bincount(inverse, minlength=len(distinct[0]))
    emitted = np.bincount(inverse, weights=batch.column("emitted").to_numpy(), minlength=len(distinct[0]))
    counts: dict[Shape, tuple[int, int]] = {}
    for shape, n, tokens in zip(_decoded(distinct, columns), steps.tolist(), emitted.tolist(), strict=True):
        before = counts.get(shape, (0, 0))  # two codes may stand for one value (a dictionary that repeats one)
        counts[shape] = (before[0] + int(n), before[1] + int(tokens))
    return counts


def _last_event_us(batch: pa.RecordBatch | pa.Table, group: list[tuple[np.ndarray, list[object]]]
                   ) -> dict[GroupKey, int]:
    distinct, inverse = _distinct([codes for codes, _ in group], [len(values) for _, values in group])
    times = batch.column("event_time").to_numpy().astype("datetime64[us]").view(np.int64)
    if len(distinct[0]) == 1:
        last = np.asarray([times.max()])
    else:
        last = np.full(len(distinct[0]), np.iinfo(np.int64).min)
        np.maximum.at(last, inverse, times)
    latest: dict[GroupKey, int] = {}
    for key, us in zip(_decoded(distinct, group), last.tolist(), strict=True):
        latest[key] = max(int(us), latest.get(key, int(us)))
    return latest


def _decoded(distinct: list[np.ndarray], columns: list[tuple[np.ndarray, list[object]]]) -> list[Any]:
    """The distinct rows' values, one tuple per row."""
    decoded = [[values[code] for code in codes.tolist()] for codes, (_, values) in zip(distinct, columns, strict=True)]
    return list(zip(*decoded, strict=True))


def _distinct(codes: list[np.ndarray], sizes: list[int]) -> tuple[list[np.ndarray], np.ndarray]:
    """The distinct rows of columns with ``0 <= codes[i] < sizes[i]``, column by column, and each
    row's index among them."""
    bins = math.prod(sizes)
    if bins >= 1 << 62:  # no single int64 code: rows as such (slower, never seen in practice)
        rows, inverse = np.unique(np.stack(codes, axis=1), axis=0, return_inverse=True)
        return list(rows.T), inverse.reshape(-1)
    code = codes[0].astype(np.int64)
    for column, size in zip(codes[1:], sizes[1:], strict=True):
        code = code * size + column
    if bins <= max(_DENSE_BINS, 2 * len(code)):
        present = np.flatnonzero(np.bincount(code, minlength=bins))
        lookup = np.zeros(bins, dtype=np.int64)
        lookup[present] = np.arange(len(present))
        unique, inverse = present, lookup[code]
    else:
        unique, inverse = np.unique(code, return_inverse=True)
    return list(np.unravel_index(unique, sizes)), inverse


def _dictionary(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list[object]]:
    """A string column as dictionary codes and the values they stand for (None for a null)."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not pa.types.is_dictionary(array.type):
        array = array.dictionary_encode()
    values: list[object] = array.dictionary.to_pylist()
    indices = array.indices
    if indices.null_count:
        indices = pc.fill_null(indices, len(values))
        values.append(None)
    return indices.to_numpy(zero_copy_only=False), values


def _integers(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list[object]]:
    """A column of non-negative integers as codes (the values themselves) and the values they stand for."""
    values = column.to_numpy()
    return values, list(range(int(values.max()) + 1))
