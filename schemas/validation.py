"""Vectorised checks of outcome columns: the per-outcome rules of :mod:`schemas.events`,
applied to whole batches at once (a test holds both to the same verdicts)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from specmetrics.schemas.codes import UNKNOWN_SEQ_LEN, KindCode, KZeroReasonCode


def outcome_rule_violations(
    cols: Mapping[str, np.ndarray], num_spec_tokens: np.ndarray
) -> list[tuple[str, np.ndarray]]:
    """Each rule's description with the mask of rows that break it.

    ``cols`` holds ``kind``, ``k_zero_reason``, ``k_sched``, ``k_valid``, ``k_invalid``, ``accepted``,
    ``emitted`` and, from schema 1.5, ``seq_len`` (``UNKNOWN_SEQ_LEN`` where not known);
    ``num_spec_tokens`` is each row's K; from schema 1.8, ``vllm_only`` whether each row's step has an
    ``vllm_only`` reason.
    """
    kind, k_zero_reason = cols["kind"], cols["k_zero_reason"]
    # In int32: the wire's int16 counts at the contract's bound (32,767) overflow in accepted + 1.
    k_sched, k_valid, k_invalid, accepted, emitted = (
        cols[name].astype(np.int32, copy=False) for name in ("k_sched", "k_valid", "k_invalid", "accepted", "emitted"))
    num_spec_tokens = num_spec_tokens.astype(np.int32, copy=False)
    drafted, skipped = (kind == KindCode.DRAFTED.value), (kind == KindCode.SKIPPED_FOR_LENGTH.value)
    grammar, kzero = (kind == KindCode.GRAMMAR_INVALID.value), (kind == KindCode.K_ZERO.value)
    rejected, vllm_only = kind == KindCode.GRAMMAR_REJECTED.value, kind == KindCode.VLLM_ONLY.value
    vllm_only_step = cols.get("vllm_only")
    budget = kzero & (k_zero_reason == KZeroReasonCode.VERIFY_BUDGET.value)
    unscheduled = kzero & (k_zero_reason != KZeroReasonCode.VERIFY_BUDGET.value)
    counts_negative = (k_sched < 0) | (k_valid < 0) | (k_invalid < 0) | (accepted < 0) | (emitted < 0)
    seq_len = cols.get("seq_len")
    return [
        (f"unknown outcome kind code (known: 0..{max(KindCode).value})", kind > max(KindCode).value),
        ("negative count", counts_negative),
        ("k_sched exceeds num_spec_tokens", k_sched > num_spec_tokens),
        ("accepted exceeds k_valid", accepted > k_valid),
        ("emitted exceeds accepted + 1", emitted > accepted + 1),
        ("k_zero_reason is only allowed on k_zero", ~kzero & (k_zero_reason != KZeroReasonCode.NONE.value)),
        ("drafted needs k_valid > 0, k_sched == k_valid, k_invalid == 0",
         drafted & ((k_valid <= 0) | (k_sched != k_valid) | (k_invalid != 0))),
        ("skipped_for_length needs k_valid <= k_sched and k_invalid == k_sched - k_valid",
         skipped & ((k_valid > k_sched) | (k_invalid != k_sched - k_valid))),
        ("grammar_invalid needs k_sched > 0, k_invalid > 0 and k_sched in (k_valid, k_valid + k_invalid)",
         grammar & ((k_sched <= 0) | (k_invalid <= 0) | ((k_sched != k_valid) & (k_sched != k_valid + k_invalid)))),
        ("grammar_rejected needs k_invalid > 0 and k_sched == k_valid + 1",
         rejected & ((k_invalid <= 0) | (k_sched != k_valid + 1))),
        (f"unknown k_zero_reason code (known: 1..{max(KZeroReasonCode).value})",
         kzero & ((k_zero_reason == KZeroReasonCode.NONE.value) | (k_zero_reason > max(KZeroReasonCode).value))),
        ("k_zero needs accepted == 0", kzero & (accepted != 0)),
        ("k_zero needs k_sched == k_valid == 0 unless k_zero_reason is verify_budget",
         unscheduled & ((k_sched != 0) | (k_valid != 0))),
        ("k_zero has k_invalid > 0 exactly when k_zero_reason is grammar_truncated (any k_invalid with verify_budget)",
         unscheduled & ((k_invalid > 0) != (k_zero_reason == KZeroReasonCode.GRAMMAR_TRUNCATED.value))),
        ("k_zero with k_zero_reason verify_budget needs k_sched > 0 and k_valid + k_invalid == k_sched",
         budget & ((k_sched <= 0) | (k_valid + k_invalid != k_sched))),
        ("vllm_only counts nothing: k_sched, k_valid, k_invalid, accepted and emitted are 0",
         vllm_only & ((k_sched != 0) | (k_valid != 0) | (k_invalid != 0) | (accepted != 0) | (emitted != 0))),
        ("a vllm_only outcome is the one outcome of a step with a 'vllm_only' reason",
         vllm_only if vllm_only_step is None else vllm_only != vllm_only_step),
        (f"seq_len must be a length (>= 0) or {UNKNOWN_SEQ_LEN} (not known)",
         np.zeros(len(kind), dtype=bool) if seq_len is None else seq_len < UNKNOWN_SEQ_LEN),
    ]


def invalid_outcome_rows(
    cols: Mapping[str, np.ndarray], num_spec_tokens: np.ndarray
) -> tuple[np.ndarray, dict[int, str]]:
    """The mask of rows that break a rule, and the first broken rule of each such row."""
    violations = outcome_rule_violations(cols, num_spec_tokens)
    bad = np.zeros(len(cols["kind"]), dtype=bool)
    for _, mask in violations:
        bad |= mask
    reasons: dict[int, str] = {}
    if bad.any():
        for row in np.flatnonzero(bad):
            reasons[int(row)] = next(rule for rule, mask in violations if mask[row])
    return bad, reasons
