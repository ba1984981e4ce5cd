"""Ingester settings (also read from ``SPECMETRICS_INGEST_*`` environment variables)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class IngestSettings(BaseSettings):
    """When a flush happens and how files are written."""

    model_config = SettingsConfigDict(env_prefix="SPECMETRICS_INGEST_", frozen=True, extra="forbid",
                                      hide_input_in_errors=True)

    flush_rows: int = Field(default=1_000_000, ge=1, description="Flush a partition at this many request "
                            "outcomes (a dead letter counts as one).")
    flush_bytes: int = Field(default=256 * 1024 * 1024, ge=1, description="... or this many message bytes.")
    flush_event_time_s: float = Field(default=600.0, gt=0, description="... or when a step's event time is this "
                                      "far past the first buffered step's (rotation by the data's own clock).")
    flush_idle_s: float = Field(default=5.0, gt=0, description="Following a live source: flush when no record "
                                "arrived for this long, so quiet streams become visible.")
    poll_records: int = Field(default=5000, ge=1, description="Records asked for per poll.")
    compression: str = Field(default="zstd", pattern="^(zstd|lz4|snappy|gzip|none)$")
    compression_level: int | None = Field(default=None, description="Codec level; None: the codec's default.")
    row_group_rows: int = Field(default=1_000_000, ge=1, description="Rows per Parquet row group.")
    group: str = Field(default="specmetrics-ingest", min_length=1, description="Kafka consumer group; ingesters "
                       "in one group split the topic's partitions.")
    dead_letter_topic: str | None = Field(default=None, description="Kafka topic for records that fail validation "
                                          "(default: <topic>.dead-letter; empty: the local files only).")
    accept_loss: bool = Field(default=False, description="Offsets gone from the source (a deleted or truncated "
                              "local log segment) are recorded in the table and ingesting goes on; off: the ingester "
                              "stores what came before them and stops with an error.")
    max_ahead_s: float = Field(default=86_400.0, ge=0, description="A step whose event time is more than this "
                               "ahead of the ingester's clock is set aside as a dead letter (an engine's clock or a "
                               "producer gone wrong); 0: no bound.")
    max_behind_s: float = Field(default=10 * 365 * 86_400.0, ge=0, description="... or more than this behind it "
                                "(default 10 years: old logs still replay; a clock at 1970 does not); 0: no bound.")
    dedupe_steps: int = Field(default=100_000, ge=0, description="Remember the event ids of this many recent steps "
                              "per partition: a step read again at a later offset (a producer's resend after a lost "
                              "acknowledgement) is set aside as a dead letter and the first copy kept; 0: off.")
    max_stalled_s: float = Field(default=120.0, gt=0, description="An ingester that has had work it does not do "
                                 "for this long (its consumer group hands out no partitions, or records wait behind "
                                 "partitions it holds and it reads none) leaves its group and joins again as a new "
                                 "member, as after a failure to reach the source.")
    log_interval_s: float = Field(default=30.0, gt=0, description="How often rows/s and lag are logged.")
    metrics_port: int | None = Field(default=None, ge=0, le=65535, description="Serve the live corrected metrics "
                                     "for Prometheus on this port (/metrics; 0: any free port); None: no endpoint.")
    metrics_host: str = Field(default="0.0.0.0", min_length=1, description="The address the metrics endpoint "
                              "listens on.")
