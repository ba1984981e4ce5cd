"""Compact codes and column types of request outcomes, shared by the wire and the checks."""

from __future__ import annotations

import numpy as np

from schemas.events import KZeroReason, OutcomeKind

#: A kind's code is its index.
KIND_CODES: tuple[OutcomeKind, ...] = (
    OutcomeKind.DRAFTED,
    OutcomeKind.SKIPPED_FOR_LENGTH,
    OutcomeKind.GRAMMAR_INVALID,
    OutcomeKind.K_ZERO,
)
#: A reason's code is its index; code 0 means "no reason" (every kind but k_zero).
REASON_CODES: tuple[KZeroReason | None, ...] = (
    None,
    KZeroReason.NO_PROPOSAL,
    KZeroReason.LENGTH_TRIM,
    KZeroReason.GRAMMAR_TRUNCATED,
    KZeroReason.SCHEDULE,
    KZeroReason.UNKNOWN,
    KZeroReason.VERIFY_BUDGET,
)
KIND_CODE = {kind: code for code, kind in enumerate(KIND_CODES)}
REASON_CODE = {reason: code for code, reason in enumerate(REASON_CODES)}

#: One request outcome on the wire: 12 packed little-endian bytes.
OUTCOME_DTYPE = np.dtype(
    [("kind", "u1"), ("reason", "u1"), ("k_sched", "<i2"), ("k_valid", "<i2"),
     ("k_invalid", "<i2"), ("accepted", "<i2"), ("emitted", "<i2")]
)
OUTCOME_COLUMNS: tuple[str, ...] = OUTCOME_DTYPE.names or ()
OFFSET_DTYPE = np.dtype("<i4")
