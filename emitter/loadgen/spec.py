"""What the load generator simulates (a typed, validated spec)."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class LoadSpec(BaseModel):
    """A vLLM-shaped workload. All randomness comes from ``seed``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rows: int = Field(default=100_000, ge=1, description="Stop after at least this many request-steps.")
    engines: int = Field(default=1, ge=1, le=1024, description="Engine instances, each with its own stream.")
    batch_size: int = Field(default=64, ge=1, le=4096, description="Requests decoding together (max_num_seqs).")
    num_spec_tokens: int = Field(default=3, ge=1, le=64, description="K.")
    acceptance: tuple[float, ...] = Field(
        default=(0.8, 0.7, 0.6),
        description="P(accept position i | positions before accepted); the last value repeats up to K.",
    )
    prompt_len: tuple[int, int] = Field(default=(32, 1400), description="Prompt length range (inclusive).")
    output_len: tuple[int, int] = Field(default=(16, 768), description="Output length range (inclusive).")
    drafter_max_len: int | None = Field(
        default=2048, ge=1, description="Drafter max length: a batch whose longest sequence plus K exceeds it "
        "skips drafting for every request (as vLLM decides it). None: never skip.",
    )
    grammar_invalid_rate: float = Field(default=0.02, ge=0, le=1, description="P(some drafts break the grammar).")
    k_zero_rate: float = Field(default=0.05, ge=0, le=1, description="P(no draft scheduled) per request-step.")
    scheduling: str = Field(default="async", pattern="^(sync|async)$", description="How grammar-invalid drafts "
                            "appear: truncated (sync) or -1 padded (async).")
    seed: int = 0
    engine_prefix: str = Field(default="loadgen", pattern=r"^[A-Za-z0-9_.-]+$", description="Engine instances are "
                               "named <prefix>-<index>.")
    model: str = "loadgen/tiny-target"
    method: str = "draft_model"
    vllm_version: str = "loadgen"
    start_time: datetime = Field(default_factory=lambda: datetime.now(UTC),
                                 description="Event time of step 0 (UTC when it has no offset).")
    step_ms: float = Field(default=25.0, gt=0, description="Event-time spacing of steps.")
    request_truth: bool = Field(default=False, description="Also count per request in the ground truth "
                                "(EngineTruth.requests), for checks of the per-request views; they grow with the "
                                "requests, so off by default.")

    @field_validator("start_time")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)

    @model_validator(mode="after")
    def _check(self) -> LoadSpec:
        if not self.acceptance or not all(0 <= p <= 1 for p in self.acceptance):
            raise ValueError("acceptance needs at least one probability, each within [0, 1]")
        for name in ("prompt_len", "output_len"):
            low, high = getattr(self, name)
            if not 1 <= low <= high:
                raise ValueError(f"{name} must be a range 1 <= low <= high, got {(low, high)}")
        return self

    def position_probs(self) -> list[float]:
        """Per-position conditional acceptance, K values long."""
        p = list(self.acceptance[: self.num_spec_tokens])
        return p + [p[-1]] * (self.num_spec_tokens - len(p))
