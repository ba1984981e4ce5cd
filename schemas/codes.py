"""Compact codes and column types of outcomes, shared by the wire and the checks.

The wire, the stored data and every check carry an outcome's kind and ``k_zero_reason`` as small
integers: :class:`KindCode` and :class:`KZeroReasonCode`. The pydantic contract and the JSON Schema
name them with :class:`schemas.events.OutcomeKind` and :class:`schemas.events.KZeroReason`; a
code and its name share the member name, and this module is the one place that relates them.

Compare numpy columns with a code's ``.value`` (a plain int): numpy takes an ``IntEnum`` for an
int64 scalar and widens a uint8 column to compare with it, about ten times slower.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np

from specmetrics.schemas.events import KZeroReason, OutcomeKind


class KindCode(IntEnum):
    """An outcome kind on the wire (column ``kind``); the member of :class:`OutcomeKind` of the same name."""

    DRAFTED = 0
    SKIPPED_FOR_LENGTH = 1
    GRAMMAR_INVALID = 2
    K_ZERO = 3
    GRAMMAR_REJECTED = 4  # schema 1.4
    VLLM_ONLY = 5  # schema 1.8


class KZeroReasonCode(IntEnum):
    """A ``k_zero_reason`` on the wire (column ``k_zero_reason``); the member of :class:`KZeroReason` of the
    same name. ``NONE`` on every kind but ``k_zero``."""

    NONE = 0
    NO_PROPOSAL = 1
    LENGTH_TRIM = 2
    GRAMMAR_TRUNCATED = 3
    SCHEDULE = 4
    UNKNOWN = 5
    VERIFY_BUDGET = 6
    SKIP_DRAFTS = 7


#: Each code's kind, indexed by code (codes run from 0 without a gap).
KIND_CODES: tuple[OutcomeKind, ...] = tuple(OutcomeKind[code.name] for code in KindCode)
#: Each code's ``k_zero_reason``, indexed by code; ``None`` for :attr:`KZeroReasonCode.NONE`.
K_ZERO_REASON_CODES: tuple[KZeroReason | None, ...] = tuple(
    None if code is KZeroReasonCode.NONE else KZeroReason[code.name] for code in KZeroReasonCode)
KIND_CODE: dict[OutcomeKind, KindCode] = {kind: KindCode(code) for code, kind in enumerate(KIND_CODES)}
K_ZERO_REASON_CODE: dict[KZeroReason | None, KZeroReasonCode] = {
    k_zero_reason: KZeroReasonCode(code) for code, k_zero_reason in enumerate(K_ZERO_REASON_CODES)}

#: One outcome on the wire: 12 packed little-endian bytes.
OUTCOME_DTYPE = np.dtype(
    [("kind", "u1"), ("k_zero_reason", "u1"), ("k_sched", "<i2"), ("k_valid", "<i2"),
     ("k_invalid", "<i2"), ("accepted", "<i2"), ("emitted", "<i2")]
)
OUTCOME_COLUMNS: tuple[str, ...] = OUTCOME_DTYPE.names or ()
OFFSET_DTYPE = np.dtype("<i4")
#: Schema 1.5: each outcome's ``seq_len`` on the wire, :data:`UNKNOWN_SEQ_LEN` where it is not known.
SEQ_LEN_DTYPE = np.dtype("<i4")
UNKNOWN_SEQ_LEN = -1
