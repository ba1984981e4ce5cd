"""Decoded step messages of one partition → one Arrow table, with no Python object per row.

Steps are kept as raw column buffers; :meth:`PartitionBuffer.build` concatenates them,
checks the request ids (not empty, UTF-8, at most :data:`MAX_REQUEST_ID_CHARS` characters,
unique in a step) and every outcome rule vectorised (:mod:`schemas.validation`), moves the
steps that break one to the dead letters, and returns the table in
:data:`schemas.REQUEST_STEP_SCHEMA`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache

import numpy as np
import pyarrow as pa

from specmetrics.ingest.observer import IngestObserver, ValidatedSteps
from specmetrics.schemas.arrow import REQUEST_STEP_SCHEMA
from specmetrics.schemas.codes import (
    K_ZERO_REASON_CODES,
    KIND_CODES,
    OFFSET_DTYPE,
    OUTCOME_COLUMNS,
    OUTCOME_DTYPE,
    UNKNOWN_SEQ_LEN,
    KZeroReasonCode,
)
from specmetrics.schemas.events import MAX_REQUEST_ID_CHARS, VllmCountsMissing
from specmetrics.schemas.validation import invalid_outcome_rows
from specmetrics.schemas.wire import VllmCountTuple, VllmRequestTuple, WireStep, seq_len_column

#: The dead-letter reason of a step whose event id was read before at another offset of its partition
#: (``ingest.settings.IngestSettings.dedupe_steps``).
DUPLICATE_STEP = ("duplicate step: its event id was read at an earlier offset of this partition (the producer "
                  "sent it again); the first copy is stored")
_STEP_STRING_COLUMNS = ("schema_version", "engine_instance", "model", "vllm_version", "method")


@cache
def _kind_names() -> pa.Array:
    """The stored dictionary of ``kind``, indexed by code; made on first use, since pa.array imports
    pandas (0.2 s of every command's start, the ones that never ingest too)."""
    return pa.array([k.value for k in KIND_CODES])


@cache
def _k_zero_reason_names() -> pa.Array:
    """The stored dictionary of ``k_zero_reason``, indexed by code ("" for none)."""
    return pa.array([str(r) if r else "" for r in K_ZERO_REASON_CODES])


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A record that could not be ingested, with the reason and its original bytes."""

    partition: int
    offset: int
    reason: str
    payload: bytes


CHUNK_ROWS = 131_072


@dataclass
class PartitionBuffer:
    """Steps read from one partition since the last flush.

    Steps are converted to Arrow every :data:`CHUNK_ROWS` request-steps, so memory stays
    close to the Arrow size of the data and large temporary buffers are not re-faulted in, and
    whenever :meth:`convert` is called; each conversion is reported to ``observer``.
    """

    partition: int
    start_offset: int
    end_offset: int = -1  # last offset consumed (stored or dead-lettered)
    rows: int = 0
    payload_bytes: int = 0
    first_event_us: int | None = None  # event time of the first valid step (rotation by event time)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    _steps: list[WireStep] = field(default_factory=list)
    _offsets: list[int] = field(default_factory=list)
    _payloads: list[bytes] = field(default_factory=list)
    _pending_rows: int = 0
    _batches: list[pa.RecordBatch] = field(default_factory=list)
    _times: list[np.ndarray] = field(default_factory=list)
    observer: IngestObserver | None = None
    source: str = ""  # the name under which the table keeps the log (the rows' log_source)
    _reported_dead_letters: int = 0

    def add(self, offset: int, payload: bytes, step: WireStep) -> None:
        self._steps.append(step)
        self._offsets.append(offset)
        self._payloads.append(payload)
        self.rows += step.n
        self._pending_rows += step.n
        self.payload_bytes += len(payload)
        self.end_offset = offset
        if self.first_event_us is None:
            self.first_event_us = step.event_time_us
        if self._pending_rows >= CHUNK_ROWS:
            self.convert()

    def reject(self, offset: int, payload: bytes, reason: str) -> None:
        self.dead_letters.append(DeadLetter(self.partition, offset, reason, payload))
        self.payload_bytes += len(payload)
        self.end_offset = offset

    def build(self) -> tuple[pa.Table, np.ndarray]:
        """The table of all valid steps, and each row's event time (µs) for partitioning."""
        self.convert()
        table = pa.Table.from_batches(self._batches, schema=REQUEST_STEP_SCHEMA)
        times = np.concatenate(self._times) if self._times else np.zeros(0, dtype=np.int64)
        return table, times

    def convert(self) -> None:
        """Validate the pending steps, dead-letter the bad ones, turn the rest into a batch; tell
        the observer."""
        steps, offsets, batch = self._validate()
        if batch is not None:
            self._batches.append(batch)
        if self.observer is not None and (steps or len(self.dead_letters) > self._reported_dead_letters):
            new = self.dead_letters[self._reported_dead_letters:]
            self._reported_dead_letters = len(self.dead_letters)
            self.observer.validated(self.source, ValidatedSteps(
                self.partition, batch, steps, offsets, [letter.offset for letter in new],
                [letter.offset for letter in new if letter.reason == DUPLICATE_STEP]))

    def _validate(self) -> tuple[list[WireStep], np.ndarray, pa.RecordBatch | None]:
        """The pending steps that are valid, their offsets and their rows; the others become dead letters."""
        steps, offsets, payloads = self._steps, np.asarray(self._offsets, dtype=np.int64), self._payloads
        self._steps, self._offsets, self._payloads, self._pending_rows = [], [], [], 0
        if not steps:
            return [], offsets, None
        n = np.fromiter((s.n for s in steps), dtype=np.int64, count=len(steps))
        request_ids, id_bytes = _request_ids(steps, n)
        bad_ids = _bad_request_id_steps(steps, n, request_ids, id_bytes)
        if bad_ids:
            # Dropped before anything reads the ids: their offsets may not even be in order.
            for index, why in sorted(bad_ids.items()):
                self.dead_letters.append(DeadLetter(self.partition, int(offsets[index]), why, payloads[index]))
            keep = [i for i in range(len(steps)) if i not in bad_ids]
            steps, offsets, payloads, n = [steps[i] for i in keep], offsets[keep], [payloads[i] for i in keep], n[keep]
            if not steps:
                return [], offsets, None
            request_ids, _ = _request_ids(steps, n)
        step_of_row = np.repeat(np.arange(len(steps)), n)
        packed = np.frombuffer(b"".join([s.outcomes for s in steps]), dtype=OUTCOME_DTYPE)
        cols = {name: np.ascontiguousarray(packed[name]) for name in OUTCOME_COLUMNS}
        cols["seq_len"] = seq_len_column(steps)
        cols["vllm_only"] = np.repeat(np.fromiter((s.vllm_only is not None for s in steps), dtype=bool,
                                                  count=len(steps)), n)
        k = np.fromiter((s.context.num_spec_tokens for s in steps), dtype=np.int64, count=len(steps))
        _, reasons = invalid_outcome_rows(cols, np.repeat(k, n))
        first_row = np.concatenate(([0], np.cumsum(n)[:-1]))
        bad_steps: dict[int, str] = {}
        for row, why in reasons.items():
            step = int(step_of_row[row])
            bad_steps.setdefault(step, f"outcome {row - int(first_row[step])}: {why}")
        for step, why in _duplicate_request_steps(request_ids, step_of_row).items():
            bad_steps.setdefault(step, why)
        if bad_steps:
            for index, why in sorted(bad_steps.items()):
                self.dead_letters.append(DeadLetter(self.partition, int(offsets[index]), why, payloads[index]))
            keep_step = np.ones(len(steps), dtype=bool)
            keep_step[list(bad_steps)] = False
            keep_row = np.repeat(keep_step, n)
            steps = [s for s, keep in zip(steps, keep_step, strict=True) if keep]
            offsets = offsets[keep_step]
            n = n[keep_step]
            step_of_row = np.repeat(np.arange(len(steps)), n)
            cols = {name: values[keep_row] for name, values in cols.items()}
            request_ids = request_ids.filter(pa.array(keep_row))
        times = np.repeat(np.fromiter((s.event_time_us for s in steps), dtype=np.int64, count=len(steps)), n)
        self._times.append(times)
        if not steps:
            return [], offsets, None
        batch = _record_batch(steps, offsets, self.source, self.partition, n, step_of_row, cols, request_ids, times)
        return steps, offsets, batch


def _request_ids(steps: list[WireStep], n: np.ndarray) -> tuple[pa.StringArray, np.ndarray]:
    """All steps' request ids as one Arrow array (not validated), and each row's length in bytes
    as its step's offsets say (zero or less: empty, or offsets out of order)."""
    data = b"".join(s.request_id_data for s in steps)
    all_offsets = np.frombuffer(b"".join(s.request_id_offsets for s in steps), dtype=OFFSET_DTYPE)
    firsts = np.zeros(len(all_offsets), dtype=bool)
    firsts[np.concatenate(([0], np.cumsum(n + 1)[:-1])).astype(np.int64)] = True
    ends = all_offsets[~firsts].astype(np.int64)
    lengths = ends - all_offsets[np.flatnonzero(~firsts) - 1]
    bases = np.concatenate(([0], np.cumsum([len(s.request_id_data) for s in steps])[:-1])).astype(np.int64)
    offsets = np.concatenate(([0], ends + np.repeat(bases, n))).astype(np.int32)
    return pa.StringArray.from_buffers(int(n.sum()), pa.py_buffer(offsets), pa.py_buffer(data)), lengths


def _bad_request_id_steps(steps: list[WireStep], n: np.ndarray, request_ids: pa.StringArray,
                          lengths: np.ndarray) -> dict[int, str]:
    """Steps with a request id that is empty, not UTF-8 or longer than
    :data:`MAX_REQUEST_ID_CHARS` characters, with the reason.

    One check of the whole batch in the common case; when it fails, halves are checked down to
    the single steps, which are then looked at id by id.
    """
    bounds = np.concatenate(([0], np.cumsum(n)))

    def surely_valid(lo: int, hi: int) -> bool:
        # Bytes bound characters from above, so a long id of multi-byte characters only costs a closer look.
        first, end = int(bounds[lo]), int(bounds[hi])
        part = lengths[first:end]
        return not len(part) or (bool(part.min() > 0) and bool(part.max() <= MAX_REQUEST_ID_CHARS)
                                 and _valid_utf8(request_ids.slice(first, end - first)))

    bad: dict[int, str] = {}
    pending = [(0, len(steps))]
    while pending:
        lo, hi = pending.pop()
        if surely_valid(lo, hi):
            continue
        if hi - lo > 1:
            pending += [(lo, (lo + hi) // 2), ((lo + hi) // 2, hi)]
        elif why := _request_id_problem(steps[lo]):
            bad[lo] = why
    return bad


def _valid_utf8(strings: pa.StringArray) -> bool:
    try:
        strings.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def _request_id_problem(step: WireStep) -> str | None:
    """Why one of the step's request ids breaks the contract, or None."""
    ends = np.frombuffer(step.request_id_offsets, dtype=OFFSET_DTYPE)
    for i in range(step.n):
        if ends[i + 1] <= ends[i]:
            return f"outcome {i}: empty request_id"
        try:
            request_id = step.request_id_data[ends[i] : ends[i + 1]].decode()
        except UnicodeDecodeError:
            return f"outcome {i}: request_id is not valid UTF-8"
        if len(request_id) > MAX_REQUEST_ID_CHARS:
            return f"outcome {i}: request_id has {len(request_id)} characters, more than {MAX_REQUEST_ID_CHARS}"
    return None


def _duplicate_request_steps(request_ids: pa.StringArray, step_of_row: np.ndarray) -> dict[int, str]:
    """Steps in which a request id appears twice (sorting (step, id code) pairs, nearly sorted already)."""
    if not len(request_ids):
        return {}
    encoded = request_ids.dictionary_encode()
    keys = step_of_row.astype(np.int64) * len(encoded.dictionary) + encoded.indices.to_numpy()
    ordered = np.sort(keys, kind="stable")
    repeats = ordered[1:][ordered[1:] == ordered[:-1]]
    return {int(key // len(encoded.dictionary)): f"request_id {encoded.dictionary[int(key % len(encoded.dictionary))]}"
            " appears twice in one step" for key in repeats}


# The helpers below repeat each step's value on each of its rows (``rows``: how many each step has);
# np.repeat, not a gather by each row's step: 8x faster, and the conversion runs on the polling thread.


def _repeat_strings(per_step: list[str], rows: np.ndarray) -> pa.DictionaryArray:
    encoded = pa.array(per_step, type=pa.string()).dictionary_encode()
    return pa.DictionaryArray.from_arrays(np.repeat(encoded.indices.to_numpy(), rows), encoded.dictionary)


def _repeat_optional_strings(per_step: list[str | None], rows: np.ndarray) -> pa.DictionaryArray:
    """Per-step strings repeated per row; ``None`` becomes null."""
    if None not in per_step:
        return _repeat_strings(per_step, rows)  # type: ignore[arg-type]
    encoded = pa.array(per_step, type=pa.string()).dictionary_encode()
    nulls = np.repeat(encoded.indices.is_null().to_numpy(zero_copy_only=False), rows)
    indices = np.repeat(encoded.indices.fill_null(0).to_numpy(), rows)
    return pa.DictionaryArray.from_arrays(pa.array(indices, mask=nulls), encoded.dictionary)


def _repeat_ints(per_step: Sequence[int | None] | np.ndarray, dtype: type, rows: np.ndarray) -> pa.Array:
    """Per-step integers repeated per row; ``None`` becomes null."""
    if isinstance(per_step, np.ndarray) or None not in per_step:
        return pa.array(np.repeat(np.asarray(per_step, dtype=dtype), rows))
    if per_step.count(None) == len(per_step):
        return pa.nulls(int(rows.sum()), pa.from_numpy_dtype(dtype))
    nulls = np.array([v is None for v in per_step])
    values: np.ndarray = np.array([0 if v is None else v for v in per_step], dtype=dtype)
    return pa.array(np.repeat(values, rows), mask=np.repeat(nulls, rows))


def _repeat_lists(per_step: list[Sequence[int] | None], rows: np.ndarray) -> pa.ListArray:
    """Per-step lists of int32 repeated per row; ``None`` becomes null. Built from offsets: a ``take``
    of a list array per row costs twice as much."""
    lists = pa.array(per_step, type=pa.list_(pa.int32()))
    offsets = lists.offsets.to_numpy()
    row_lengths = np.repeat(np.diff(offsets), rows)
    row_offsets = np.zeros(len(row_lengths) + 1, dtype=np.int32)
    np.cumsum(row_lengths, out=row_offsets[1:])
    # each row's values: its step's, from where the step's list starts in the flat values
    flat = np.repeat(np.repeat(offsets[:-1], rows) - row_offsets[:-1], row_lengths) + np.arange(row_offsets[-1],
                                                                                                 dtype=np.int32)
    valid = np.repeat(lists.is_valid().to_numpy(zero_copy_only=False), rows)
    return pa.ListArray.from_arrays(pa.array(row_offsets), lists.values.take(pa.array(flat)),
                                    mask=None if valid.all() else pa.array(~valid))


def _record_batch(
    steps: list[WireStep],
    offsets: np.ndarray,
    source: str,
    partition: int,
    rows: np.ndarray,
    step_of_row: np.ndarray,
    cols: dict[str, np.ndarray],
    request_ids: pa.StringArray,
    times: np.ndarray,
) -> pa.RecordBatch:
    contexts = [s.context for s in steps]
    columns: dict[str, pa.Array] = {
        name: _repeat_strings([getattr(c, name) for c in contexts], rows) for name in _STEP_STRING_COLUMNS
    }
    columns["engine_id"] = _repeat_strings([c.engine_id for c in contexts], rows)
    columns["event_id"] = _repeat_strings([s.event_id for s in steps], rows)
    for name, values, dtype in (
        ("dp_rank", [c.dp_rank for c in contexts], np.int16),
        ("num_spec_tokens", [c.num_spec_tokens for c in contexts], np.int16),
        ("drafter_max_len", [c.drafter_max_len for c in contexts], np.int32),
        ("step_index", [s.step_index for s in steps], np.int64),
        ("batch_max_seq_len", [s.batch_max_seq_len for s in steps], np.int32),
        ("drafts_verified", [s.drafts_verified for s in steps], np.int32),
        ("max_model_len", [c.max_model_len for c in contexts], np.int32),
        ("context_cap_from", [c.context_cap_from for c in contexts], np.int32),
        ("log_offset", offsets, np.int64),
    ):
        columns[name] = _repeat_ints(values, dtype, rows)
    columns["skip_check"] = _repeat_optional_strings([s.skip_check for s in steps], rows)
    columns["event_time"] = pa.array(times, type=pa.timestamp("us"))
    columns["log_source"] = pa.DictionaryArray.from_arrays(  # null where no source was named (a bare buffer)
        pa.array(np.zeros(len(step_of_row), dtype=np.int32), mask=None if source else np.ones(len(step_of_row), bool)),
        pa.array([source]))
    columns["log_partition"] = pa.array(np.full(len(step_of_row), partition, dtype=np.int32))
    columns["request_id"] = request_ids
    columns["kind"] = pa.DictionaryArray.from_arrays(pa.array(cols["kind"].astype(np.int32)), _kind_names())
    k_zero_reason = cols["k_zero_reason"].astype(np.int32)
    columns["k_zero_reason"] = pa.DictionaryArray.from_arrays(
        pa.array(k_zero_reason, mask=k_zero_reason == KZeroReasonCode.NONE.value), _k_zero_reason_names()
    )
    for name in ("k_sched", "k_valid", "k_invalid", "accepted", "emitted"):
        columns[name] = pa.array(cols[name])
    unknown = cols["seq_len"] == UNKNOWN_SEQ_LEN
    columns["seq_len"] = (pa.nulls(len(unknown), pa.int32()) if unknown.all()
                          else pa.array(cols["seq_len"], mask=unknown if unknown.any() else None))
    columns.update(_vllm_counts([s.vllm_counts for s in steps], rows))
    columns.update(_vllm_finished(steps, step_of_row, request_ids))
    columns["vllm_only"] = _repeat_optional_strings([s.vllm_only for s in steps], rows)
    return pa.RecordBatch.from_arrays([columns[f.name] for f in REQUEST_STEP_SCHEMA], schema=REQUEST_STEP_SCHEMA)


#: The stored columns of vLLM's per-request metrics: (name, field of a VllmRequestTuple, type).
_VLLM_REQUEST_COLUMNS = (("vllm_request_histogram", 1, pa.list_(pa.int32())),
                         ("vllm_request_draft_tokens", 2, pa.int32()),
                         ("vllm_request_accepted_per_step", 3, pa.list_(pa.int32())),
                         ("vllm_request_drafted_per_step", 4, pa.list_(pa.int32())))


def _vllm_finished(steps: list[WireStep], step_of_row: np.ndarray, request_ids: pa.StringArray) -> dict[str, pa.Array]:
    """vLLM's per-request metrics (schema 1.7) on the row of each request at the step it finished;
    null on every other row (and where a finished request has no row at that step: it verified no
    draft there)."""
    rows: dict[int, VllmRequestTuple] = {}
    finishing = [index for index, step in enumerate(steps) if step.vllm_finished]
    for index, start in zip(finishing, np.searchsorted(step_of_row, finishing).tolist(), strict=True):
        finished = steps[index].vllm_finished or ()
        ids = request_ids.slice(start, steps[index].n).to_pylist()
        where = {request_id: start + row for row, request_id in enumerate(ids)}
        rows.update((where[r[0]], r) for r in finished if r[0] in where)
    if not rows:  # most batches: no request finished with vLLM's metrics
        return {name: pa.nulls(len(step_of_row), kind) for name, _, kind in _VLLM_REQUEST_COLUMNS}
    entries = list(rows.values())
    at = np.full(len(step_of_row), -1, dtype=np.int64)
    at[list(rows)] = np.arange(len(entries))
    index = pa.array(at, mask=at < 0)
    return {name: pa.array([entry[field] for entry in entries], type=kind).take(index)
            for name, field, kind in _VLLM_REQUEST_COLUMNS}


def _vllm_counts(per_step: list[VllmCountTuple | VllmCountsMissing | None], rows: np.ndarray
                 ) -> dict[str, pa.Array]:
    """vLLM's own counters of each step, repeated per row (schema 1.6), and why a step has none."""
    counts = [None if value is None or isinstance(value, VllmCountsMissing) else value for value in per_step]
    columns = {name: _repeat_ints([None if c is None else c[:3][i] for c in counts], np.int32, rows)
               for i, name in enumerate(("vllm_num_drafts", "vllm_num_draft_tokens", "vllm_num_accepted_tokens"))}
    columns["vllm_accepted_per_pos"] = _repeat_lists([None if c is None else c[3] for c in counts], rows)
    columns["vllm_counts_missing"] = _repeat_optional_strings(
        [value.value if isinstance(value, VllmCountsMissing) else None for value in per_step], rows)
    return columns
