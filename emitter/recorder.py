"""What the scheduler saw at one step → one outcome per request (DESIGN.md section 3).

Pure logic on plain values, no vLLM import: the vLLM hooks (``emitter.vllm``) feed it.
Everything it keeps is per step (the worker's last drafting decision, the drafts validated
after the last step) and is replaced at every step, so no per-request state outlives it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from schemas.codes import KIND_CODE, REASON_CODE
from schemas.events import KZeroReason, OutcomeKind
from schemas.wire import OutcomeColumns

DRAFTED = KIND_CODE[OutcomeKind.DRAFTED]
SKIPPED = KIND_CODE[OutcomeKind.SKIPPED_FOR_LENGTH]
GRAMMAR_INVALID = KIND_CODE[OutcomeKind.GRAMMAR_INVALID]
K_ZERO = KIND_CODE[OutcomeKind.K_ZERO]
NO_PROPOSAL = REASON_CODE[KZeroReason.NO_PROPOSAL]
LENGTH_TRIM = REASON_CODE[KZeroReason.LENGTH_TRIM]
GRAMMAR_TRUNCATED = REASON_CODE[KZeroReason.GRAMMAR_TRUNCATED]
SCHEDULE = REASON_CODE[KZeroReason.SCHEDULE]
UNKNOWN = REASON_CODE[KZeroReason.UNKNOWN]


class DraftDecision(NamedTuple):
    """The worker's batch-wide choice after a step: did the drafter run for the next drafts?"""

    fits: bool
    max_seq_len: int
    drafter_max_len: int


class Verified(NamedTuple):
    """One request verified at this step, as read before vLLM processes the output."""

    request_id: str
    k_sched: int  # len(scheduled_spec_decode_tokens[r]), pads and placeholders included
    pads: int  # -1 pads of grammar-invalid drafts (async: num_invalid_spec_tokens)
    accepted: int  # len(sampled) - 1 when drafts were scheduled, else 0
    num_tokens: int  # the request's tokens before this step's output


@dataclass
class StepRecorder:
    """Classifies request-steps. ``max_model_len`` is the target's (for length trims)."""

    max_model_len: int
    decision: DraftDecision | None = None  # applies to the drafts verified at the next step
    drafts: dict[str, tuple[int, int]] = field(default_factory=dict)  # request -> (proposed, kept)

    def drafts_validated(self, request_id: str, proposed: int, kept: int) -> None:
        """Sync scheduling: the drafts proposed after this step, and how many the grammar kept."""
        self.drafts[request_id] = (proposed, kept)

    def classify(self, rows: list[Verified], emitted: list[int]) -> OutcomeColumns:
        """The outcome columns of one step; consumes the state the previous step left."""
        skipped = self.decision is not None and not self.decision.fits
        drafts, self.drafts = self.drafts, {}
        kind: list[int] = []
        reason: list[int] = []
        k_sched: list[int] = []
        k_valid: list[int] = []
        k_invalid: list[int] = []
        accepted: list[int] = []
        for row in rows:
            proposed, kept = drafts.get(row.request_id, (-1, -1))
            truncated = proposed - kept if kept >= 0 else 0
            if skipped:
                values = (SKIPPED, 0, row.k_sched, row.k_sched - row.pads, row.pads, row.accepted)
            elif row.k_sched == 0:
                values = (K_ZERO, self._k_zero_reason(row, proposed, kept), 0, 0, truncated if kept == 0 else 0, 0)
            elif row.pads:
                values = (GRAMMAR_INVALID, 0, row.k_sched, row.k_sched - row.pads, row.pads, row.accepted)
            elif truncated:
                values = (GRAMMAR_INVALID, 0, row.k_sched, row.k_sched, truncated, row.accepted)
            else:
                values = (DRAFTED, 0, row.k_sched, row.k_sched, 0, row.accepted)
            for column, value in zip((kind, reason, k_sched, k_valid, k_invalid, accepted), values, strict=True):
                column.append(value)
        return OutcomeColumns([r.request_id for r in rows], kind, reason, k_sched, k_valid, k_invalid, accepted,
                              emitted)

    def _k_zero_reason(self, row: Verified, proposed: int, kept: int) -> int:
        if proposed < 0:
            return UNKNOWN
        if proposed == 0:
            return NO_PROPOSAL
        if kept == 0:
            return GRAMMAR_TRUNCATED
        if row.num_tokens + 1 >= self.max_model_len:
            return LENGTH_TRIM
        return SCHEDULE
