"""Request-step counts of one batch of stored rows, per group: the arithmetic of the live metrics.

The definitions are the SQL macros' (queries/sql/definitions/drafts.sql), computed with numpy over
a whole batch: a corrected draft is a request-step of kind ``drafted``, or ``grammar_invalid``
with ``k_valid > 0``; a vLLM draft is one with ``k_sched > 0``. The per-position counts take a
0-based position ``i`` (accepted > i, k_valid > i), for i below the group's K.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from schemas.codes import K_ZERO_REASON_CODES, KIND_CODES, KindCode

#: A group of request-steps: (model, engine_id, method, num_spec_tokens).
GroupKey = tuple[str, str, str, int]

_DRAFTED, _SKIPPED, _INVALID, _K_ZERO = (code.value for code in KindCode)
_KIND_CODE = {kind.value: code for code, kind in enumerate(KIND_CODES)}
_K_ZERO_REASON_CODE = {(reason.value if reason else ""): code for code, reason in enumerate(K_ZERO_REASON_CODES)}
#: Room for every (kind, reason) pair in one code: kind * REASONS + reason.
REASONS = 8


@dataclass
class GroupCounts:
    """The counts of one group (plain integers; per-position lists indexed by position)."""

    num_spec_tokens: int
    drafts: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    vllm_drafts: int = 0
    vllm_draft_tokens: int = 0
    vllm_accepted_tokens: int = 0
    emitted_tokens: int = 0
    verified_slots: int = 0
    placeholder_slots: int = 0
    pad_slots: int = 0
    last_event_us: int = -(2**63)
    #: Request-steps by ``kind * REASONS + reason`` code.
    request_steps: dict[int, int] = field(default_factory=dict)
    accepted_per_pos: list[int] = field(default_factory=list)
    reached_per_pos: list[int] = field(default_factory=list)
    vllm_accepted_per_pos: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name in ("accepted_per_pos", "reached_per_pos", "vllm_accepted_per_pos"):
            if not getattr(self, name):
                setattr(self, name, [0] * self.num_spec_tokens)

    def add(self, other: GroupCounts) -> None:
        """Add ``other``'s counts (the same group) to these."""
        for name in ("drafts", "draft_tokens", "accepted_tokens", "vllm_drafts", "vllm_draft_tokens",
                     "vllm_accepted_tokens", "emitted_tokens", "verified_slots", "placeholder_slots", "pad_slots"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.last_event_us = max(self.last_event_us, other.last_event_us)
        for code, count in other.request_steps.items():
            self.request_steps[code] = self.request_steps.get(code, 0) + count
        for name in ("accepted_per_pos", "reached_per_pos", "vllm_accepted_per_pos"):
            mine, theirs = getattr(self, name), getattr(other, name)
            setattr(self, name, [a + b for a, b in zip(mine, theirs, strict=True)])


def kind_and_reason(code: int) -> tuple[str, str]:
    """The kind and ``k_zero`` reason ("" unless ``k_zero``) of a request-step code."""
    reason = K_ZERO_REASON_CODES[code % REASONS]
    return KIND_CODES[code // REASONS].value, reason.value if reason else ""


def count_batch(batch: pa.RecordBatch | pa.Table) -> dict[GroupKey, GroupCounts]:
    """The counts of each group with rows in ``batch`` (columns of :data:`schemas.arrow.REQUEST_STEP_SCHEMA`)."""
    if not len(batch):
        return {}
    keys, group = _groups(batch)
    n_groups = len(keys)
    kind = _codes(batch.column("kind"), _KIND_CODE)
    reason = _codes(batch.column("k_zero_reason"), _K_ZERO_REASON_CODE)
    k_sched, k_valid, accepted, emitted = (
        batch.column(name).to_numpy().astype(np.int64) for name in ("k_sched", "k_valid", "accepted", "emitted"))
    draft = (kind == _DRAFTED) | ((kind == _INVALID) & (k_valid > 0))
    vllm_draft = k_sched > 0
    skipped = kind == _SKIPPED

    def total(weights: np.ndarray) -> np.ndarray:
        return np.bincount(group, weights=weights, minlength=n_groups).astype(np.int64)

    sums = {
        "drafts": total(draft), "draft_tokens": total(k_valid * draft), "accepted_tokens": total(accepted * draft),
        "vllm_drafts": total(vllm_draft), "vllm_draft_tokens": total(k_valid * vllm_draft),
        "vllm_accepted_tokens": total(accepted * vllm_draft), "emitted_tokens": total(emitted),
        "verified_slots": total(k_sched * (kind != _K_ZERO)), "placeholder_slots": total(k_valid * skipped),
        "pad_slots": total((k_sched - k_valid) * (skipped | (kind == _INVALID))),
    }
    width = int(max(k_sched.max(), k_valid.max(), *(key[3] for key in keys))) + 1
    per_pos = {
        "accepted_per_pos": _above(group, accepted, draft, n_groups, width),
        "reached_per_pos": _above(group, k_valid, draft, n_groups, width),
        "vllm_accepted_per_pos": _above(group, accepted, vllm_draft, n_groups, width),
    }
    steps = np.bincount(group * (len(KIND_CODES) * REASONS) + kind * REASONS + reason,
                        minlength=n_groups * len(KIND_CODES) * REASONS).reshape(n_groups, -1)
    last = _last_event_us(batch, group, n_groups)
    counts: dict[GroupKey, GroupCounts] = {}
    for g, key in enumerate(keys):
        k = key[3]
        group_counts = counts[key] = GroupCounts(
            num_spec_tokens=k, last_event_us=int(last[g]),
            request_steps={int(code): int(steps[g, code]) for code in np.flatnonzero(steps[g])})
        for name, values in sums.items():
            setattr(group_counts, name, int(values[g]))
        for name, positions in per_pos.items():
            setattr(group_counts, name, [int(v) for v in positions[g, :k]])
    return counts


def _groups(batch: pa.RecordBatch | pa.Table) -> tuple[list[GroupKey], np.ndarray]:
    """The batch's groups, and each row's group index."""
    columns = [_dictionary(batch.column(name)) for name in ("model", "engine_id", "method")]
    k = batch.column("num_spec_tokens").to_numpy().astype(np.int64)
    indices = [codes for codes, _ in columns]
    if all(codes.min() == codes.max() for codes in indices) and k.min() == k.max():  # one group: the usual batch
        key = (*(str(values[int(codes[0])]) for codes, values in columns), int(k[0]))
        return [key], np.zeros(len(k), dtype=np.int64)  # type: ignore[list-item]
    combined = k
    for codes, values in columns:
        combined = combined * len(values) + codes
    unique, group = _compact(combined)
    first = np.zeros(len(unique), dtype=np.int64)
    first[group[::-1]] = np.arange(len(group))[::-1]
    keys: list[GroupKey] = [
        (*(str(values[int(codes[row])]) for codes, values in columns), int(k[row]))  # type: ignore[misc]
        for row in first
    ]
    return keys, group.astype(np.int64)


def _compact(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct codes, and each code's index among them: a lookup table where the codes are
    small (one pass), a sort where they are not."""
    if int(codes.max()) < 1 << 20:
        present = np.flatnonzero(np.bincount(codes))
        lookup = np.zeros(int(present[-1]) + 1, dtype=np.int64)
        lookup[present] = np.arange(len(present))
        return present, lookup[codes]
    unique, index = np.unique(codes, return_inverse=True)
    return unique, index


def _dictionary(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """Dictionary codes (int64) and the dictionary's values of a string column."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not pa.types.is_dictionary(array.type):
        array = array.dictionary_encode()
    return array.indices.to_numpy(zero_copy_only=False).astype(np.int64), array.dictionary.to_pylist()


def _codes(column: pa.Array | pa.ChunkedArray, code_of: dict[str, int]) -> np.ndarray:
    """A kind or reason column as codes (null: the code of "")."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not pa.types.is_dictionary(array.type):
        array = array.dictionary_encode()
    values = array.dictionary.to_pylist()
    lookup = np.asarray([code_of[value] for value in values] + [code_of.get("", 0)], dtype=np.int64)
    indices = array.indices
    if indices.null_count:
        indices = pc.fill_null(indices, len(lookup) - 1)
    codes: np.ndarray = lookup[indices.to_numpy().astype(np.int64)]
    return codes


def _above(group: np.ndarray, value: np.ndarray, where: np.ndarray, n_groups: int, width: int) -> np.ndarray:
    """Per group and position i: rows with ``where`` and ``value > i``."""
    histogram = np.bincount(group * width + value, weights=where, minlength=n_groups * width).reshape(n_groups, width)
    at_least = histogram[:, ::-1].cumsum(axis=1)[:, ::-1]  # rows with value >= j
    above: np.ndarray = np.concatenate([at_least[:, 1:], np.zeros((n_groups, 1))], axis=1).astype(np.int64)
    return above


def _last_event_us(batch: pa.RecordBatch | pa.Table, group: np.ndarray, n_groups: int) -> np.ndarray:
    times = batch.column("event_time").to_numpy().astype("datetime64[us]").astype(np.int64)
    if n_groups == 1:
        return np.asarray([times.max()], dtype=np.int64)
    last = np.full(n_groups, -(2**63), dtype=np.int64)
    np.maximum.at(last, group, times)
    return last
