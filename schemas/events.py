"""The event contract: one step event per engine step, carrying one outcome per request.

Semantics: docs/design.md#events. Events hold facts only (counts, limits, ids,
times), never derived ratios: every metric is computed later, in SQL.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator

from specmetrics.schemas.version import SCHEMA_VERSION, check_schema_version

NonNegInt = Annotated[int, Field(ge=0, le=32767)]
PosInt = Annotated[int, Field(gt=0, le=32767)]
Length = Annotated[int, Field(ge=0, le=2**31 - 1)]
#: The longest request id the contract allows, in characters.
MAX_REQUEST_ID_CHARS = 256


class OutcomeKind(StrEnum):
    """What happened to one request's speculation at one step."""

    DRAFTED = "drafted"
    SKIPPED_FOR_LENGTH = "skipped_for_length"
    GRAMMAR_INVALID = "grammar_invalid"
    K_ZERO = "k_zero"
    GRAMMAR_REJECTED = "grammar_rejected"  # schema 1.4
    VLLM_ONLY = "vllm_only"  # schema 1.8: one per step whose outcomes the plugin did not see


class KZeroReason(StrEnum):
    """Why no draft slot was scheduled for a decoding request while speculation is on."""

    NO_PROPOSAL = "no_proposal"
    LENGTH_TRIM = "length_trim"
    GRAMMAR_TRUNCATED = "grammar_truncated"
    SCHEDULE = "schedule"
    UNKNOWN = "unknown"
    VERIFY_BUDGET = "verify_budget"
    SKIP_DRAFTS = "skip_drafts"  # schema 1.3: the scheduler told the drafter to skip (SchedulerOutput.skip_drafts)


class SkipCheck(StrEnum):
    """Schema 1.3: whether a skip for length could have been seen for the drafts verified at a step."""

    OBSERVED = "observed"  # the worker's drafter-fit decision arrived (V1 model runner)
    NONE = "none"  # Model Runner V2: vLLM never skips drafting for length there (it caps the context instead)
    UNOBSERVED = "unobserved"  # the V1 model runner, but no decision arrived: skips unknown


class VllmCountsMissing(StrEnum):
    """Schema 1.6: why a step carries none of vLLM's own counters."""

    STATS_OFF = "stats_off"  # vLLM computes no stats (--disable-log-stats): there is nothing to compare with
    NOT_RETURNED = "not_returned"  # stats on, but the step's outputs held no SchedulerStats


class VllmOnlyReason(StrEnum):
    """Schema 1.8: why the plugin saw none of a step's outcomes, only vLLM's own counters (its stat logger)."""

    STEP_HOOK_OFF = "step_hook_off"  # SPECMETRICS_STEP_HOOK=false: the operator turned the scheduler hook off
    STEP_HOOK_NOT_INSTALLED = "step_hook_not_installed"  # the running vLLM's scheduler does not match the hook
    STEP_HOOK_DISABLED = "step_hook_disabled"  # observing the outcomes raised at run time: the hook stopped


#: The request id of a :class:`VllmOnly` outcome: it stands for the whole step.
ALL_REQUESTS = "*"


class VllmCounts(BaseModel):
    """Schema 1.6: the step's ``SpecDecodingStats`` exactly as vLLM computed it (vLLM's own numbers,
    not the plugin's model of them); all 0 where vLLM counted no draft at the step."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    num_drafts: Length
    num_draft_tokens: Length
    num_accepted_tokens: Length
    num_accepted_tokens_per_pos: list[Length] = Field(max_length=32767, description="Per draft position.")


class VllmRequestMetrics(BaseModel):
    """Schema 1.7: one finished request's ``RequestSpecDecodeMetrics`` exactly as vLLM kept them (vLLM's
    ``--per-request-spec-decode-metrics``): its drafts by accepted tokens, its draft tokens and, at the
    ``detailed`` level, per verify step the tokens accepted and drafted."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    request_id: str = Field(min_length=1, max_length=MAX_REQUEST_ID_CHARS)
    acceptance_histogram: list[Length] = Field(
        max_length=32768, description="Drafts by accepted draft tokens j = 0 .. K (length K + 1).")
    num_draft_tokens: Length
    per_step_accepted: list[Length] = Field(default_factory=list, max_length=2**20)
    per_step_drafted: list[Length] = Field(default_factory=list, max_length=2**20)


class _Outcome(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    request_id: str = Field(min_length=1, max_length=MAX_REQUEST_ID_CHARS, description="vLLM request id.")
    emitted: NonNegInt = Field(
        description="Tokens committed for the request at this step, after stop handling "
        "(an EOS inside the accepted run truncates)."
    )
    seq_len: Length | None = Field(
        default=None,
        description="Schema 1.5: the request's sequence length (its computed tokens once that step ran) at "
        "the step after which the drafter-fit check decided about the drafts verified now: the request "
        "alone fits the drafter when seq_len + K <= drafter_max_len. Null when not known (after a step "
        "dropped from a full queue, or from an older plugin).",
    )


class Drafted(_Outcome):
    """The drafter ran and every scheduled draft was verified by the target."""

    kind: Literal["drafted"] = "drafted"
    k_valid: PosInt = Field(description="Draft tokens the target verified.")
    accepted: NonNegInt = Field(description="len(sampled_token_ids) - 1.")

    @model_validator(mode="after")
    def _check(self) -> Drafted:
        _check_accepted(self.accepted, self.k_valid)
        _check_emitted(self.emitted, self.accepted)
        return self


class SkippedForLength(_Outcome):
    """Drafting was skipped for length: the verified drafts were placeholders."""

    kind: Literal["skipped_for_length"] = "skipped_for_length"
    k_sched: NonNegInt = Field(description="Placeholder draft slots scheduled (-1 pads included).")
    k_valid: NonNegInt = Field(description="Scheduled slots minus -1 pads.")
    accepted: NonNegInt = Field(description="Placeholders accepted by chance.")

    @model_validator(mode="after")
    def _check(self) -> SkippedForLength:
        if self.k_valid > self.k_sched:
            raise ValueError(f"k_valid ({self.k_valid}) exceeds k_sched ({self.k_sched})")
        _check_accepted(self.accepted, self.k_valid)
        _check_emitted(self.emitted, self.accepted)
        return self


class GrammarInvalid(_Outcome):
    """Some drafts broke the grammar: truncated (sync scheduling) or padded with -1 (async)."""

    kind: Literal["grammar_invalid"] = "grammar_invalid"
    k_sched: PosInt = Field(
        description="Draft slots scheduled: k_valid in sync mode (invalid ones were truncated), "
        "k_valid + k_invalid in async mode (invalid ones are -1 pads)."
    )
    k_valid: NonNegInt = Field(description="Drafts the target really verified.")
    k_invalid: PosInt = Field(description="Drafts invalidated by the grammar.")
    accepted: NonNegInt = Field(description="len(sampled_token_ids) - 1.")

    @model_validator(mode="after")
    def _check(self) -> GrammarInvalid:
        if self.k_sched not in (self.k_valid, self.k_valid + self.k_invalid):
            raise ValueError(
                f"k_sched ({self.k_sched}) must equal k_valid ({self.k_valid}) (sync) or "
                f"k_valid + k_invalid ({self.k_valid + self.k_invalid}) (async)"
            )
        _check_accepted(self.accepted, self.k_valid)
        _check_emitted(self.emitted, self.accepted)
        return self


class KZero(_Outcome):
    """Speculation is on but the target verified no draft of the request: none was scheduled, or
    (reason ``verify_budget``, schema 1.1) the runner's adaptive verification verified none of
    the scheduled drafts, which vLLM still counts (``k_sched``, ``k_valid``)."""

    # The JSON name stays ``reason`` until the next major version (a rename is a major change).
    model_config = ConfigDict(serialize_by_alias=True)

    kind: Literal["k_zero"] = "k_zero"
    k_zero_reason: KZeroReason = Field(alias="reason", description="Why no draft was verified, where known.")
    k_sched: NonNegInt = Field(
        default=0, description="Draft slots scheduled but not verified (reason verify_budget only)."
    )
    k_valid: NonNegInt = Field(
        default=0, description="k_sched minus -1 pads, as vLLM counts them (reason verify_budget only)."
    )
    k_invalid: NonNegInt = Field(
        default=0,
        description="Drafts the grammar truncated (reason grammar_truncated), or the -1 pads among the "
        "unverified slots (reason verify_budget).",
    )

    @model_validator(mode="after")
    def _check(self) -> KZero:
        if self.k_zero_reason is KZeroReason.VERIFY_BUDGET:
            if not self.k_sched:
                raise ValueError("reason 'verify_budget' needs k_sched > 0")
            if self.k_valid + self.k_invalid != self.k_sched:
                raise ValueError(
                    f"reason 'verify_budget' needs k_valid + k_invalid == k_sched, got "
                    f"{self.k_valid} + {self.k_invalid} != {self.k_sched}"
                )
        else:
            if self.k_sched or self.k_valid:
                raise ValueError("k_sched and k_valid > 0 are only allowed with reason 'verify_budget'")
            if self.k_invalid and self.k_zero_reason is not KZeroReason.GRAMMAR_TRUNCATED:
                raise ValueError("k_invalid > 0 is only allowed with reason 'grammar_truncated' or 'verify_budget'")
            if self.k_zero_reason is KZeroReason.GRAMMAR_TRUNCATED and not self.k_invalid:
                raise ValueError("reason 'grammar_truncated' needs k_invalid > 0")
        _check_emitted(self.emitted, 0)
        return self


class GrammarRejected(_Outcome):
    """Schema 1.4: some drafts broke the grammar, and the first invalid one was verified, which the
    target always rejects (vLLM 0.34 on, sync scheduling: ``trim_spec_tokens`` keeps the valid drafts
    and the first invalid one for rejection sampling). vLLM counts ``k_sched`` draft tokens; the
    corrected metrics count the ``k_valid`` drafts that obeyed the grammar."""

    kind: Literal["grammar_rejected"] = "grammar_rejected"
    k_sched: PosInt = Field(description="Drafts verified: the valid ones and the first invalid one (k_valid + 1).")
    k_valid: NonNegInt = Field(description="Verified drafts that obeyed the grammar.")
    k_invalid: PosInt = Field(description="Drafts that broke the grammar: the verified one and those cut after it.")
    accepted: NonNegInt = Field(description="len(sampled_token_ids) - 1.")

    @model_validator(mode="after")
    def _check(self) -> GrammarRejected:
        if self.k_sched != self.k_valid + 1:
            raise ValueError(f"k_sched ({self.k_sched}) must equal k_valid + 1 ({self.k_valid + 1})")
        _check_accepted(self.accepted, self.k_valid)
        _check_emitted(self.emitted, self.accepted)
        return self


class VllmOnly(_Outcome):
    """Schema 1.8: the plugin saw none of the step's outcomes (the envelope's ``vllm_only`` says why):
    the step's ``vllm_counts`` are vLLM's own numbers, and all that is known of it; the corrected
    metrics cannot count it. The one outcome of such a step, for the whole step
    (``request_id`` :data:`ALL_REQUESTS`)."""

    kind: Literal["vllm_only"] = "vllm_only"

    @model_validator(mode="after")
    def _check(self) -> VllmOnly:
        if self.request_id != ALL_REQUESTS:
            raise ValueError(f"a vllm_only outcome stands for the whole step: request_id must be {ALL_REQUESTS!r}")
        if self.emitted:
            raise ValueError("a vllm_only outcome counts nothing: emitted must be 0")
        return self


Outcome = Annotated[Drafted | SkippedForLength | GrammarInvalid | KZero | GrammarRejected | VllmOnly,
                    Field(discriminator="kind")]


class EngineContext(BaseModel):
    """What stays the same from one step of an engine to the next."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    schema_version: str = Field(default=SCHEMA_VERSION, description="MAJOR.MINOR of this contract.")
    engine_instance: str = Field(min_length=1, max_length=256, description="Engine instance label.")
    dp_rank: NonNegInt = Field(default=0, description="Data-parallel rank of the engine.")
    model: str = Field(min_length=1, description="Target model name.")
    vllm_version: str = Field(min_length=1)
    method: str = Field(min_length=1, description="Speculative method (draft_model, ngram, eagle, ...).")
    num_spec_tokens: NonNegInt = Field(description="Configured K (num_speculative_tokens).")
    drafter_max_len: Length | None = Field(default=None, description="The drafter's max model length.")
    max_model_len: Length | None = Field(
        default=None, description="Schema 1.3: the target's max model length as the engine serves it."
    )
    context_cap_from: Length | None = Field(
        default=None,
        description="Schema 1.3: the target's max model length before vLLM lowered it to the drafter's "
        "(Model Runner V2 cannot skip drafting for longer sequences); null when vLLM did not lower it.",
    )

    @field_validator("schema_version")
    @classmethod
    def _known_major(cls, value: str) -> str:
        check_schema_version(value)
        return value

    @property
    def engine_id(self) -> str:
        """Engine identity used by the views: instance label plus data-parallel rank."""
        return engine_id(self.engine_instance, self.dp_rank)


class StepEnvelope(EngineContext):
    """The context of one engine step, shared by all its request-steps."""

    event_id: str = Field(min_length=1, max_length=128, description="Globally unique id of this step event.")
    step_index: int = Field(ge=0, lt=2**63, description="Engine step counter.")
    event_time: AwareDatetime = Field(description="When the step's output was processed (UTC).")
    batch_max_seq_len: Length | None = Field(
        default=None, description="Longest sequence in the batch, as the drafter-fit check saw it."
    )
    drafts_verified: Length | None = Field(
        default=None,
        description="Schema 1.1: the draft tokens the target verified at this step, over the whole "
        "batch, when the runner verified only some of those scheduled (adaptive verification; which "
        "request's drafts were left out stays on the GPU, so the outcomes' k_valid are upper bounds). "
        "Null when every scheduled draft was verified, or none was (those outcomes are k_zero, "
        "reason verify_budget).",
    )

    skip_check: SkipCheck | None = Field(
        default=None,
        description="Schema 1.3: whether a skip for length could have been seen for the drafts verified "
        "at this step: observed, none (the runner never skips), unobserved (skips unknown); null when "
        "not reported.",
    )
    dropped_steps: int | None = Field(
        default=None, ge=0, lt=2**63,
        description="Schema 1.2: the steps the sending plugin process had dropped when it sent this one (its "
        "queue was full, or the sink failed), counted since the process started; null when not reported.",
    )
    vllm_counts: VllmCounts | None = Field(
        default=None,
        description="Schema 1.6: vLLM's own spec-decoding counters of this step (SchedulerStats."
        "spec_decoding_stats), to audit the plugin's vLLM-compatible numbers against; null when not "
        "reported (vllm_counts_missing says why, or the sender predates 1.6).",
    )
    vllm_counts_missing: VllmCountsMissing | None = Field(
        default=None, description="Schema 1.6: why vllm_counts is null (stats_off, not_returned)."
    )
    vllm_finished: list[VllmRequestMetrics] | None = Field(
        default=None,
        description="Schema 1.7: vLLM's own per-request metrics of the requests that finished at this step, "
        "when vLLM keeps them (--per-request-spec-decode-metrics summary or detailed); null otherwise.",
    )
    vllm_only: VllmOnlyReason | None = Field(
        default=None,
        description="Schema 1.8: why the plugin saw none of this step's outcomes (its one outcome is of kind "
        "vllm_only and vllm_counts holds vLLM's own numbers); null for a step it observed.",
    )

    @model_validator(mode="after")
    def _counts_or_why_not(self) -> StepEnvelope:
        if self.vllm_counts is not None and self.vllm_counts_missing is not None:
            raise ValueError("vllm_counts and vllm_counts_missing exclude each other")
        return self

    @field_validator("event_time")
    @classmethod
    def _to_utc(cls, value: datetime) -> datetime:
        return value.astimezone(UTC)


class StepEvent(StepEnvelope):
    """One engine step: its context, and one outcome per request whose drafts were verified
    (or which got no draft) at this step."""

    outcomes: list[Outcome] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check_outcomes(self) -> StepEvent:
        vllm_only = [outcome for outcome in self.outcomes if isinstance(outcome, VllmOnly)]
        if (self.vllm_only is not None) != bool(vllm_only) or (vllm_only and len(self.outcomes) != 1):
            raise ValueError("a step with a 'vllm_only' reason has one outcome, of kind vllm_only, and only such "
                             "a step has one")
        seen: set[str] = set()
        for outcome in self.outcomes:
            if outcome.request_id in seen:
                raise ValueError(f"request_id {outcome.request_id!r} appears twice in one step")
            seen.add(outcome.request_id)
            k_sched = getattr(outcome, "k_sched", getattr(outcome, "k_valid", 0))
            if k_sched > self.num_spec_tokens:
                raise ValueError(
                    f"request {outcome.request_id!r}: {k_sched} draft slots exceed K={self.num_spec_tokens}"
                )
        return self


def engine_id(engine_instance: str, dp_rank: int) -> str:
    """The engine id of the views: ``"<instance>/dp<rank>"``."""
    return f"{engine_instance}/dp{dp_rank}"


def _check_accepted(accepted: int, k_valid: int) -> None:
    if accepted > k_valid:
        raise ValueError(f"accepted ({accepted}) exceeds k_valid ({k_valid})")


def _check_emitted(emitted: int, accepted: int) -> None:
    if emitted > accepted + 1:
        raise ValueError(f"emitted ({emitted}) exceeds accepted + 1 ({accepted + 1})")


def step_event_json_schema() -> dict[str, object]:
    """The JSON Schema of :class:`StepEvent` (what ``specmetrics schema --format json`` prints)."""
    schema = StepEvent.model_json_schema()
    schema["$id"] = f"https://specmetrics.dev/schemas/step-event/{SCHEMA_VERSION}"
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema
