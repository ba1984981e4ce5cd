"""The plugin's settings, from ``SPECMETRICS_*`` environment variables (frozen, validated)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class EmitterSettings(BaseSettings):
    """Configuration of the vLLM plugin. Without ``SPECMETRICS_SINK`` the plugin records nothing."""

    model_config = SettingsConfigDict(env_prefix="SPECMETRICS_", frozen=True, extra="ignore",
                                      hide_input_in_errors=True)

    sink: str | None = Field(default=None, description="Where step events go, e.g. file:///var/lib/specmetrics/log. "
                             "Unset: the plugin is loaded but records nothing.")
    engine_label: str | None = Field(default=None, min_length=1, max_length=200,
                                     description="engine_instance of the events (default: <hostname>-<pid>).")
    queue_steps: int = Field(default=10_000, ge=1, description="Steps buffered in memory before new ones are "
                             "dropped (counted) instead of blocking the engine.")
    flush_interval_ms: int = Field(default=100, ge=1, description="Longest time a step waits in the queue.")
    batch_steps: int = Field(default=256, ge=1, description="Steps per sink write.")
    health_interval_s: float = Field(default=60.0, gt=0, description="How often the health record is written.")
    step_hook: bool = Field(default=True, description="Wrap vLLM's scheduler to record every step's outcomes. "
                            "false: vLLM's own counters only, from its stat logger (vllm serve), for a release "
                            "where the hook misbehaves; the corrected metrics are then unavailable.")
    health_file: Path | None = Field(default=None, description="Where the health record (JSON) is written; "
                                     "unset: a log line only.")
