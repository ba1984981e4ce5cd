"""Exact counters of what the load generator produced, to check the views against."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from specmetrics.schemas.codes import K_ZERO_REASON_CODES, KIND_CODES, KindCode


@dataclass
class EngineTruth:
    """Counters for one engine (one engine_id, model, method, K), as the views define them
    (docs/design.md#metric-definitions)."""

    num_spec_tokens: int
    drafter_max_len: int | None = None
    steps: int = 0
    skipped_steps: int = 0
    request_steps: dict[str, int] = field(default_factory=dict)
    k_zero_reasons: dict[str, int] = field(default_factory=dict)
    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    vllm_num_drafts: int = 0
    vllm_num_draft_tokens: int = 0
    vllm_num_accepted_tokens: int = 0
    k_invalid_tokens: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)
    reached_per_pos: list[int] = field(default_factory=list)
    vllm_accepted_per_pos: list[int] = field(default_factory=list)
    #: Request-steps skipped for length whose request alone fit the drafter (seq_len + K <=
    #: drafter_max_len), those whose request did not, and the draft slots the first lost.
    collateral_skips: int = 0
    own_skips: int = 0
    lost_draft_tokens: int = 0
    #: Per request id, when asked for (LoadSpec.request_truth): request-steps, corrected drafts, their
    #: draft tokens and accepted tokens.
    requests: dict[str, RequestTruth] | None = None

    def __post_init__(self) -> None:
        k = self.num_spec_tokens
        for name in ("accepted_per_pos", "reached_per_pos", "vllm_accepted_per_pos"):
            if not getattr(self, name):
                setattr(self, name, [0] * k)

    def add_step(self, cols: dict[str, np.ndarray], skipped: bool, request_ids: list[str] | None = None,
                 lengths: np.ndarray | None = None) -> None:
        """Count one step's outcomes (``request_ids``: each outcome's request, for :attr:`requests`;
        ``lengths``: each outcome's ``seq_len``)."""
        kind, k_sched, k_valid, accepted = cols["kind"], cols["k_sched"], cols["k_valid"], cols["accepted"]
        self.steps += 1
        self.skipped_steps += int(skipped)
        collateral = np.zeros(len(kind), dtype=bool)
        if skipped and lengths is not None and self.drafter_max_len is not None:
            collateral = lengths + self.num_spec_tokens <= self.drafter_max_len
            self.collateral_skips += int(collateral.sum())
            self.own_skips += int((~collateral).sum())
            self.lost_draft_tokens += int(k_valid[collateral].sum())
        for code, count in zip(*np.unique(kind, return_counts=True), strict=True):
            name = KIND_CODES[code].value
            self.request_steps[name] = self.request_steps.get(name, 0) + int(count)
        k_zero_reasons = cols["k_zero_reason"][kind == KindCode.K_ZERO.value]
        for code, count in zip(*np.unique(k_zero_reasons, return_counts=True), strict=True):
            name = str(K_ZERO_REASON_CODES[code])
            self.k_zero_reasons[name] = self.k_zero_reasons.get(name, 0) + int(count)
        self.k_invalid_tokens += int(cols["k_invalid"].sum())
        grammar_with_valid = (kind == KindCode.GRAMMAR_INVALID.value) & (k_valid > 0)
        corrected = (kind == KindCode.DRAFTED.value) | grammar_with_valid
        vllm = k_sched > 0
        self.num_drafts += int(corrected.sum())
        self.num_draft_tokens += int(k_valid[corrected].sum())
        self.num_accepted_tokens += int(accepted[corrected].sum())
        self.vllm_num_drafts += int(vllm.sum())
        self.vllm_num_draft_tokens += int(k_valid[vllm].sum())
        self.vllm_num_accepted_tokens += int(accepted[vllm].sum())
        for i in range(self.num_spec_tokens):
            self.accepted_per_pos[i] += int((accepted[corrected] > i).sum())
            self.reached_per_pos[i] += int((k_valid[corrected] > i).sum())
            self.vllm_accepted_per_pos[i] += int((accepted[vllm] > i).sum())
        if self.requests is not None and request_ids is not None:
            for request_id, draft, valid, taken, lost in zip(request_ids, corrected.tolist(), k_valid.tolist(),
                                                             accepted.tolist(), collateral.tolist(), strict=True):
                request = self.requests.setdefault(request_id, RequestTruth())
                request.request_steps += 1
                if lost:
                    request.collateral_skips += 1
                    request.lost_draft_tokens += valid
                if draft:
                    request.num_drafts += 1
                    request.num_draft_tokens += valid
                    request.num_accepted_tokens += taken

    @property
    def rows(self) -> int:
        return sum(self.request_steps.values())

    def to_dict(self) -> dict[str, object]:
        counters = asdict(self)
        if self.requests is None:
            del counters["requests"]
        return counters


@dataclass
class RequestTruth:
    """Counters for one request, as the views request_acceptance and collateral_skips define them."""

    request_steps: int = 0
    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    collateral_skips: int = 0
    lost_draft_tokens: int = 0
