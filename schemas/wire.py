"""Wire encoding of a step event: one msgpack map per step, outcomes as raw columns.

The choice is measured in BENCHMARKS.md ("Wire encoding"): outcomes travel as one
buffer of packed fixed-size records and request ids as one UTF-8 blob plus int32 offsets
(Arrow's own string layout), so a reader turns a whole batch of steps into Arrow arrays
without a Python object per request-step. :func:`step_event_to_wire` / :func:`step_event_from_wire` convert to and
from the pydantic contract (:class:`schemas.events.StepEvent`).

Message layout: a msgpack array, fields by position (:data:`FIELDS`)::

    0  schema_version      "MAJOR.MINOR"
    1  event_id            str
    2  engine_instance     str
    3  dp_rank             int
    4  model               str
    5  vllm_version        str
    6  method              str
    7  num_spec_tokens     int (K)
    8  drafter_max_len     int or nil
    9  step_index          int, 0 to 2**63 - 1 (stored as int64)
    10 event_time_us       int, microseconds since the Unix epoch (UTC), from 0001-01-01 to
                           9999-12-31T23:59:59.999999 (:data:`MIN_EVENT_TIME_US`, :data:`MAX_EVENT_TIME_US`)
    11 batch_max_seq_len   int or nil
    12 n                   number of request-steps
    13 outcomes            bytes: n packed records of 12 bytes (schemas.codes.OUTCOME_DTYPE):
                           kind u8, k_zero_reason u8 (codes: KIND_CODES, K_ZERO_REASON_CODES),
                           k_sched, k_valid, k_invalid, accepted, emitted int16 LE
    14 request_id_offsets  bytes: n + 1 int32 LE offsets into request_id_data, from 0
    15 request_id_data     bytes: UTF-8 request ids concatenated
    16 drafts_verified     int or nil (schema 1.1; optional: a 1.0 message ends at field 15)
    17 dropped_steps       int or nil (schema 1.2; optional): steps the sending plugin process had
                           dropped so far (queue full or sink failure), counted since it started
    18 max_model_len       int or nil (schema 1.3; optional, engine context): the target's max model
                           length as served
    19 context_cap_from    int or nil (schema 1.3; optional, engine context): the target's max model
                           length before vLLM lowered it to the drafter's
    20 skip_check          str or nil (schema 1.3; optional): "observed", "none" or "unobserved"
    21 seq_lens            bytes or nil (schema 1.5; optional): n int32 LE, each outcome's ``seq_len``
                           (-1 where it is not known; nil when none is)
    22 vllm_counts         array, str or nil (schema 1.6; optional): vLLM's own counters of the step,
                           [num_drafts, num_draft_tokens, num_accepted_tokens, [per position ...]];
                           or why there are none ("stats_off", "not_returned"); nil: not reported
    23 vllm_finished       array or nil (schema 1.7; optional): per request that finished at the step
                           with vLLM's per-request metrics, [request_id, [histogram], num_draft_tokens,
                           [per_step_accepted], [per_step_drafted]]; nil: vLLM keeps none
    24 vllm_only           str or nil (schema 1.8; optional): why the plugin saw none of the step's
                           outcomes ("step_hook_off", "step_hook_not_installed", "step_hook_disabled");
                           its one outcome is then of kind vllm_only, request id "*", and vllm_counts
                           are vLLM's own

An array, not a map, because it decodes three times faster (BENCHMARKS.md). Additive changes
append fields; readers ignore fields past the ones they know.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import msgpack
import numpy as np
from pydantic import ValidationError

from specmetrics.schemas.codes import (
    K_ZERO_REASON_CODE,
    K_ZERO_REASON_CODES,
    KIND_CODE,
    KIND_CODES,
    OFFSET_DTYPE,
    OUTCOME_COLUMNS,
    OUTCOME_DTYPE,
    SEQ_LEN_DTYPE,
    UNKNOWN_SEQ_LEN,
    KindCode,
    KZeroReasonCode,
)
from specmetrics.schemas.events import (
    ALL_REQUESTS,
    MAX_REQUEST_ID_CHARS,
    Drafted,
    EngineContext,
    GrammarInvalid,
    GrammarRejected,
    KZero,
    Outcome,
    OutcomeKind,
    SkipCheck,
    SkippedForLength,
    StepEnvelope,
    StepEvent,
    VllmCounts,
    VllmCountsMissing,
    VllmOnlyReason,
    VllmRequestMetrics,
)
from specmetrics.schemas.validation import invalid_outcome_rows
from specmetrics.schemas.version import SCHEMA_MAJOR, SCHEMA_VERSION, check_schema_version

FIELDS = (
    "schema_version",
    "event_id",
    "engine_instance",
    "dp_rank",
    "model",
    "vllm_version",
    "method",
    "num_spec_tokens",
    "drafter_max_len",
    "step_index",
    "event_time_us",
    "batch_max_seq_len",
    "n",
    "outcomes",
    "request_id_offsets",
    "request_id_data",
    "drafts_verified",
    "dropped_steps",
    "max_model_len",
    "context_cap_from",
    "skip_check",
    "seq_lens",
    "vllm_counts",
    "vllm_finished",
    "vllm_only",
)
#: The fields every message of this major version has; later ones are optional.
REQUIRED_FIELDS = 16
_SEQ_LENS = FIELDS.index("seq_lens")
_VLLM_COUNTS = FIELDS.index("vllm_counts")
_VLLM_FINISHED = FIELDS.index("vllm_finished")
_VLLM_ONLY = FIELDS.index("vllm_only")
#: The envelope's keys in message order, without the fields the encoder makes (n and the outcome buffers).
ENVELOPE_KEYS = (*FIELDS[1:12], *FIELDS[16:_SEQ_LENS])
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
#: The event times a reader accepts: years 1 to 9999 (UTC), what a Python datetime holds (the
#: contract's ``event_time``, the ingester's ``dt=`` folder names); Arrow's timestamp holds more.
MIN_EVENT_TIME_US = (datetime.min.replace(tzinfo=UTC) - _EPOCH) // _US
MAX_EVENT_TIME_US = (datetime.max.replace(tzinfo=UTC) - _EPOCH) // _US


class InvalidRecord(ValueError):
    """A record that does not follow the contract; the message says why."""


IntColumn = Sequence[int] | np.ndarray
#: vLLM's own counters of a step: num_drafts, num_draft_tokens, num_accepted_tokens, per position.
VllmCountTuple = tuple[int, int, int, tuple[int, ...]]
#: One finished request's metrics as vLLM kept them: request id, accepted-count histogram, draft
#: tokens, per-step accepted and drafted (empty below the detailed level).
VllmRequestTuple = tuple[str, tuple[int, ...], int, tuple[int, ...], tuple[int, ...]]
_COUNT_LIMIT = 2**31


class OutcomeColumns(NamedTuple):
    """The outcomes of one step, one sequence per column (codes: schemas.codes)."""

    request_id: Sequence[str]
    kind: IntColumn
    k_zero_reason: IntColumn
    k_sched: IntColumn
    k_valid: IntColumn
    k_invalid: IntColumn
    accepted: IntColumn
    emitted: IntColumn
    seq_len: IntColumn | None = None  # schema 1.5: UNKNOWN_SEQ_LEN where not known; None: none known


class WireStep(NamedTuple):
    """A decoded message whose envelope is validated; outcome columns are still raw buffers."""

    context: EngineContext
    event_id: str
    step_index: int
    event_time_us: int
    batch_max_seq_len: int | None
    n: int
    request_id_data: bytes
    request_id_offsets: bytes
    outcomes: bytes
    drafts_verified: int | None = None
    dropped_steps: int | None = None
    skip_check: SkipCheck | None = None
    seq_lens: bytes | None = None  # n values of SEQ_LEN_DTYPE (schema 1.5); None: none known
    #: Schema 1.6: vLLM's own counters (num_drafts, num_draft_tokens, num_accepted_tokens, per position),
    #: or why there are none; None: not reported.
    vllm_counts: VllmCountTuple | VllmCountsMissing | None = None
    #: Schema 1.7: vLLM's per-request metrics of the requests that finished at the step; None: none kept.
    vllm_finished: tuple[VllmRequestTuple, ...] | None = None
    #: Schema 1.8: why the plugin saw none of the step's outcomes; None: it observed them.
    vllm_only: VllmOnlyReason | None = None

    def envelope(self) -> StepEnvelope:
        """The envelope as the pydantic contract."""
        return StepEnvelope.model_validate({
            **self.context.model_dump(),
            "event_id": self.event_id,
            "step_index": self.step_index,
            "event_time": _EPOCH + timedelta(microseconds=self.event_time_us),
            "batch_max_seq_len": self.batch_max_seq_len,
            "drafts_verified": self.drafts_verified,
            "dropped_steps": self.dropped_steps,
            "skip_check": self.skip_check,
            **vllm_counts_fields(self.vllm_counts),
            "vllm_finished": None if self.vllm_finished is None else [
                VllmRequestMetrics(request_id=r, acceptance_histogram=list(h), num_draft_tokens=t,
                                   per_step_accepted=list(a), per_step_drafted=list(d))
                for r, h, t, a, d in self.vllm_finished],
            "vllm_only": self.vllm_only,
        })


def encode_step(envelope: dict[str, Any], outcomes: OutcomeColumns) -> bytes:
    """Encode one step. ``envelope`` holds :data:`ENVELOPE_KEYS` (those of schema 1.1 on may be absent),
    and may hold ``vllm_counts`` (a :data:`VllmCountTuple` or a :class:`VllmCountsMissing`), ``vllm_finished``
    and ``vllm_only`` (an :class:`VllmOnlyReason`)."""
    ids = [rid.encode() for rid in outcomes.request_id]
    offsets = np.zeros(len(ids) + 1, dtype=OFFSET_DTYPE)
    np.cumsum([len(i) for i in ids], out=offsets[1:])
    packed = np.empty(len(ids), dtype=OUTCOME_DTYPE)
    for name in OUTCOME_COLUMNS:
        packed[name] = getattr(outcomes, name)
    seq_lens = None if outcomes.seq_len is None else np.asarray(outcomes.seq_len, dtype=SEQ_LEN_DTYPE).tobytes()
    counts = envelope.get("vllm_counts")
    message = [SCHEMA_VERSION, *(envelope[key] for key in ENVELOPE_KEYS[:11]), len(ids), packed.tobytes(),
               offsets.tobytes(), b"".join(ids), *(envelope.get(key) for key in ENVELOPE_KEYS[11:]), seq_lens,
               counts.value if isinstance(counts, VllmCountsMissing) else counts, envelope.get("vllm_finished"),
               None if (vllm_only := envelope.get("vllm_only")) is None else VllmOnlyReason(vllm_only).value]
    encoded: bytes = msgpack.packb(message, use_bin_type=True)
    return encoded


def decode_step(payload: bytes) -> WireStep:
    """Decode and check one message's structure and envelope.

    Raises :class:`InvalidRecord` (or :class:`UnsupportedSchemaVersion`) with the reason.
    The values inside the outcome columns are checked per batch by
    :func:`schemas.validation.invalid_outcome_rows`.
    """
    if not payload:
        raise InvalidRecord("empty message: 0 bytes")
    try:
        message = msgpack.unpackb(payload, raw=False, use_list=False)
    except Exception as exc:  # msgpack raises several unrelated types, some without a message
        raise InvalidRecord(f"not a msgpack step message: {str(exc) or type(exc).__name__}") from None
    if type(message) is not tuple:
        raise InvalidRecord(f"step message must be a msgpack array, got {type(message).__name__}")
    check_schema_version(message[0] if message else None)
    if len(message) < REQUIRED_FIELDS:
        raise InvalidRecord(
            f"step message has {len(message)} fields; schema {SCHEMA_MAJOR}.x needs at least {REQUIRED_FIELDS}")
    context = _engine_context(message)
    event_id, step_index, event_time, batch_max, n, outcomes, offsets, data = message[1], *message[9:16]
    if type(event_id) is not str or not 0 < len(event_id) <= 128:
        raise InvalidRecord(f"'event_id' must be a string of 1 to 128 characters, got {event_id!r}")
    if type(step_index) is not int or not 0 <= step_index < 2**63:
        raise InvalidRecord(f"'step_index' must be a non-negative integer below 2**63, got {step_index!r}")
    if type(event_time) is not int or not MIN_EVENT_TIME_US <= event_time <= MAX_EVENT_TIME_US:
        raise InvalidRecord("'event_time_us' must be an integer from 0001-01-01 to 9999-12-31 (UTC), "
                            f"{MIN_EVENT_TIME_US} to {MAX_EVENT_TIME_US}, got {event_time!r}")
    if batch_max is not None and (type(batch_max) is not int or not 0 <= batch_max < 2**31):
        raise InvalidRecord(f"'batch_max_seq_len' must be null or an integer in [0, 2**31), got {batch_max!r}")
    verified = message[16] if len(message) > REQUIRED_FIELDS else None
    if verified is not None and (type(verified) is not int or not 0 <= verified < 2**31):
        raise InvalidRecord(f"'drafts_verified' must be null or an integer in [0, 2**31), got {verified!r}")
    dropped = message[17] if len(message) > REQUIRED_FIELDS + 1 else None
    if dropped is not None and (type(dropped) is not int or not 0 <= dropped < 2**63):
        raise InvalidRecord(f"'dropped_steps' must be null or an integer in [0, 2**63), got {dropped!r}")
    skip_check = message[20] if len(message) > REQUIRED_FIELDS + 4 else None
    if skip_check is not None and (type(skip_check) is not str or skip_check not in _SKIP_CHECKS):
        raise InvalidRecord(f"'skip_check' must be null or one of {', '.join(_SKIP_CHECKS)}, got {skip_check!r}")
    if type(n) is not int or n < 0:
        raise InvalidRecord(f"'n' must be a non-negative integer, got {n!r}")
    if type(outcomes) is not bytes or len(outcomes) != n * OUTCOME_DTYPE.itemsize:
        raise InvalidRecord(f"'outcomes' must be n * {OUTCOME_DTYPE.itemsize} = {n * OUTCOME_DTYPE.itemsize} bytes")
    if type(offsets) is not bytes or len(offsets) != (n + 1) * OFFSET_DTYPE.itemsize or type(data) is not bytes:
        raise InvalidRecord("'request_id_offsets' must be n + 1 int32 values and 'request_id_data' bytes")
    if offsets[:4] != b"\0\0\0\0" or int.from_bytes(offsets[-4:], "little") != len(data):
        raise InvalidRecord("'request_id_offsets' must run from 0 to len(request_id_data)")
    seq_lens = message[_SEQ_LENS] if len(message) > _SEQ_LENS else None
    if seq_lens is not None and (type(seq_lens) is not bytes or len(seq_lens) != n * SEQ_LEN_DTYPE.itemsize):
        raise InvalidRecord(f"'seq_lens' must be null or n int32 values ({n * SEQ_LEN_DTYPE.itemsize} bytes)")
    counts = _vllm_counts(message[_VLLM_COUNTS]) if len(message) > _VLLM_COUNTS else None
    finished = _vllm_finished(message[_VLLM_FINISHED]) if len(message) > _VLLM_FINISHED else None
    vllm_only = message[_VLLM_ONLY] if len(message) > _VLLM_ONLY else None
    if vllm_only is not None:
        if type(vllm_only) is not str or vllm_only not in _VLLM_ONLY_REASONS:
            raise InvalidRecord(f"'vllm_only' must be null or one of {', '.join(_VLLM_ONLY_REASONS)}, got "
                                f"{vllm_only!r}"[:300])
        if n != 1 or data != _ALL_REQUESTS or type(counts) is not tuple:
            raise InvalidRecord(f"a step with a 'vllm_only' reason has one outcome (kind vllm_only, request id "
                                f"{ALL_REQUESTS!r}) and vLLM's own counters; got {n} outcomes and vllm_counts "
                                f"{counts!r}"[:300])
        vllm_only = _VLLM_ONLY_REASONS[vllm_only]
    return WireStep(context, event_id, step_index, event_time, batch_max, n, data, offsets, outcomes, verified,
                    dropped, None if skip_check is None else _SKIP_CHECKS[skip_check], seq_lens, counts, finished,
                    vllm_only)


def _counts(values: Any, limit: int) -> bool:
    """Whether ``values`` is a tuple of at most ``limit`` integers in [0, 2**31)."""
    return type(values) is tuple and len(values) <= limit and all(
        type(v) is int and 0 <= v < _COUNT_LIMIT for v in values)


def _vllm_finished(value: Any) -> tuple[VllmRequestTuple, ...] | None:
    """The message's per-request metrics, checked."""
    if value is None:
        return None
    if type(value) is tuple and all(
            type(r) is tuple and len(r) == 5 and type(r[0]) is str and 0 < len(r[0]) <= MAX_REQUEST_ID_CHARS
            and _counts(r[1], 32768) and type(r[2]) is int and 0 <= r[2] < _COUNT_LIMIT
            and _counts(r[3], 2**20) and _counts(r[4], 2**20) for r in value):
        return value
    raise InvalidRecord("'vllm_finished' must be null or a list of [request_id, [histogram], num_draft_tokens, "
                        f"[per_step_accepted], [per_step_drafted]] with integers in [0, 2**31), got {value!r}"[:300])


_MISSING = {reason.value: reason for reason in VllmCountsMissing}


def _vllm_counts(value: Any) -> VllmCountTuple | VllmCountsMissing | None:
    """The message's vLLM counters, checked: three counts below 2**31 and a list of them per position,
    or a reason there are none."""
    if value is None:
        return None
    if type(value) is str and value in _MISSING:
        return _MISSING[value]
    if type(value) is tuple and len(value) == 4 and type(value[3]) is tuple and len(value[3]) <= 32767 \
            and all(type(v) is int and 0 <= v < _COUNT_LIMIT for v in (*value[:3], *value[3])):
        return value[0], value[1], value[2], value[3]
    raise InvalidRecord(f"'vllm_counts' must be null, one of {', '.join(_MISSING)}, or [num_drafts, "
                        "num_draft_tokens, num_accepted_tokens, [per position]] of integers in [0, 2**31), got "
                        f"{value!r}"[:300])


def vllm_counts_fields(counts: VllmCountTuple | VllmCountsMissing | None) -> dict[str, Any]:
    """The envelope's ``vllm_counts`` and ``vllm_counts_missing`` of a decoded message's counters."""
    if isinstance(counts, VllmCountsMissing):
        return {"vllm_counts": None, "vllm_counts_missing": counts}
    if counts is None:
        return {"vllm_counts": None, "vllm_counts_missing": None}
    drafts, tokens, accepted, per_pos = counts
    return {"vllm_counts_missing": None, "vllm_counts": VllmCounts(
        num_drafts=drafts, num_draft_tokens=tokens, num_accepted_tokens=accepted,
        num_accepted_tokens_per_pos=list(per_pos))}


_CONTEXT_FIELDS = (0, 2, 3, 4, 5, 6, 7, 8, 18, 19)
_contexts: dict[tuple[Any, ...], EngineContext] = {}
_SKIP_CHECKS = {check.value: check for check in SkipCheck}
_VLLM_ONLY_REASONS = {reason.value: reason for reason in VllmOnlyReason}
_ALL_REQUESTS = ALL_REQUESTS.encode()


def _engine_context(message: tuple[Any, ...]) -> EngineContext:
    """The validated engine context of a message; an engine's context is validated once."""
    values = message[0:1] + message[2:9] + message[18:20]
    key = (values, tuple(map(type, values)))
    try:
        return _contexts[key]
    except (KeyError, TypeError):
        pass
    try:
        context = EngineContext.model_validate(
            {FIELDS[i]: message[i] for i in _CONTEXT_FIELDS if i < len(message)}, strict=True)
    except ValidationError as exc:
        raise InvalidRecord(f"invalid step envelope: {_short(exc)}") from None
    if len(_contexts) >= 4096:
        _contexts.clear()
    _contexts[key] = context
    return context


def _short(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'event'}: {e['msg']}" for e in exc.errors())


def event_time_us(when: datetime) -> int:
    """Microseconds since the Unix epoch (UTC) of an aware datetime."""
    return (when - _EPOCH) // _US


def step_event_to_wire(event: StepEvent) -> bytes:
    """Encode a validated :class:`StepEvent`."""
    envelope = event.model_dump(include=set(ENVELOPE_KEYS))
    envelope["event_time_us"] = event_time_us(event.event_time)
    envelope["vllm_finished"] = None if event.vllm_finished is None else [
        (m.request_id, tuple(m.acceptance_histogram), m.num_draft_tokens, tuple(m.per_step_accepted),
         tuple(m.per_step_drafted)) for m in event.vllm_finished]
    envelope["vllm_only"] = event.vllm_only
    counts = event.vllm_counts
    envelope["vllm_counts"] = event.vllm_counts_missing if counts is None else (
        counts.num_drafts, counts.num_draft_tokens, counts.num_accepted_tokens,
        tuple(counts.num_accepted_tokens_per_pos))
    rows = [_outcome_row(o) for o in event.outcomes]
    columns = {
        name: [row[i] for row in rows] for i, name in enumerate(OUTCOME_COLUMNS)
    }
    seq_len = [UNKNOWN_SEQ_LEN if o.seq_len is None else o.seq_len for o in event.outcomes]
    return encode_step(envelope, OutcomeColumns(
        request_id=[o.request_id for o in event.outcomes], **columns,
        seq_len=seq_len if any(o.seq_len is not None for o in event.outcomes) else None))


def _outcome_row(o: Outcome) -> tuple[int, ...]:
    """(kind, k_zero_reason, k_sched, k_valid, k_invalid, accepted, emitted) of one outcome."""
    no_k_zero_reason = KZeroReasonCode.NONE
    if isinstance(o, Drafted):
        return (KindCode.DRAFTED, no_k_zero_reason, o.k_valid, o.k_valid, 0, o.accepted, o.emitted)
    if isinstance(o, SkippedForLength):
        return (KindCode.SKIPPED_FOR_LENGTH, no_k_zero_reason, o.k_sched, o.k_valid, o.k_sched - o.k_valid, o.accepted,
                o.emitted)
    if isinstance(o, GrammarInvalid | GrammarRejected):
        return (KIND_CODE[OutcomeKind(o.kind)], no_k_zero_reason, o.k_sched, o.k_valid, o.k_invalid, o.accepted,
                o.emitted)
    if isinstance(o, KZero):
        return (KindCode.K_ZERO, K_ZERO_REASON_CODE[o.k_zero_reason], o.k_sched, o.k_valid, o.k_invalid, 0, o.emitted)
    return (KindCode.VLLM_ONLY, no_k_zero_reason, 0, 0, 0, 0, 0)


def step_event_from_wire(payload: bytes) -> StepEvent:
    """Decode one message into the pydantic contract, validating every outcome.

    Slow (a Python object per outcome): for tests and small tools, not for ingest.
    """
    step = decode_step(payload)
    ends = np.frombuffer(step.request_id_offsets, dtype=OFFSET_DTYPE)
    if step.n and bool((np.diff(ends) <= 0).any()):
        raise InvalidRecord("request ids must not be empty")
    packed = np.frombuffer(step.outcomes, dtype=OUTCOME_DTYPE)
    cols = {name: packed[name] for name in OUTCOME_COLUMNS}
    cols["seq_len"] = seq_len_column([step])
    cols["vllm_only"] = np.full(step.n, step.vllm_only is not None)
    _, reasons = invalid_outcome_rows(cols, np.full(step.n, step.context.num_spec_tokens))
    if reasons:
        bad_row, reason = next(iter(reasons.items()))
        raise InvalidRecord(f"outcome {bad_row}: {reason}")
    outcomes: list[dict[str, Any]] = []
    for i in range(step.n):
        request_id = step.request_id_data[ends[i] : ends[i + 1]].decode()
        outcomes.append(_outcome_dict(request_id, {name: int(cols[name][i]) for name in cols}))
    try:
        return StepEvent.model_validate({**step.envelope().model_dump(), "outcomes": outcomes})
    except ValidationError as exc:
        raise InvalidRecord(f"invalid step event: {_short(exc)}") from None


def _outcome_dict(request_id: str, row: dict[str, int]) -> dict[str, Any]:
    kind = KIND_CODES[row["kind"]]
    base: dict[str, Any] = {"kind": kind.value, "request_id": request_id, "emitted": row["emitted"],
                            "seq_len": None if row["seq_len"] == UNKNOWN_SEQ_LEN else row["seq_len"]}
    if kind is OutcomeKind.K_ZERO:
        return {**base, "reason": K_ZERO_REASON_CODES[row["k_zero_reason"]],
                **{name: row[name] for name in ("k_sched", "k_valid", "k_invalid")}}
    fields = {
        OutcomeKind.VLLM_ONLY: (),
        OutcomeKind.DRAFTED: ("k_valid", "accepted"),
        OutcomeKind.SKIPPED_FOR_LENGTH: ("k_sched", "k_valid", "accepted"),
        OutcomeKind.GRAMMAR_INVALID: ("k_sched", "k_valid", "k_invalid", "accepted"),
        OutcomeKind.GRAMMAR_REJECTED: ("k_sched", "k_valid", "k_invalid", "accepted"),
    }[kind]
    return {**base, **{name: row[name] for name in fields}}


def seq_len_column(steps: Sequence[WireStep]) -> np.ndarray:
    """The ``seq_len`` of every outcome of ``steps``, in order: :data:`UNKNOWN_SEQ_LEN` where a step
    carries none (written before schema 1.5, or by a sender that knew none)."""
    return np.frombuffer(b"".join([s.seq_lens if s.seq_lens is not None
                                   else _UNKNOWN_SEQ_LEN_BYTES * s.n for s in steps]), dtype=SEQ_LEN_DTYPE)


_UNKNOWN_SEQ_LEN_BYTES = np.array([UNKNOWN_SEQ_LEN], dtype=SEQ_LEN_DTYPE).tobytes()
