"""Kafka client settings from ``SPECMETRICS_KAFKA_*`` (frozen, validated; secrets never printed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def _default_spool_dir() -> Path:
    return Path.home() / ".local" / "state" / "specmetrics" / "spool"


class KafkaSettings(BaseSettings):
    """How the sink, the ingester and the dead-letter producer talk to Kafka."""

    model_config = SettingsConfigDict(env_prefix="SPECMETRICS_KAFKA_", frozen=True, extra="ignore",
                                      hide_input_in_errors=True)

    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: Path | None = Field(default=None, description="CA bundle that signed the brokers' certificates.")
    ssl_certfile: Path | None = Field(default=None, description="Client certificate (mutual TLS).")
    ssl_keyfile: Path | None = None
    ssl_password: SecretStr | None = Field(default=None, description="Password of the client key.")

    topic_partitions: int = Field(default=6, ge=1, description="Partitions of a topic this tool creates.")
    topic_replication: int = Field(default=1, ge=1, description="Replication factor of a topic this tool creates "
                                   "(1 for a single broker; 3 on a production cluster).")
    topic_retention_ms: int | None = Field(default=None, ge=-1, description="retention.ms of a topic this tool "
                                           "creates (-1: forever; unset: the broker's default).")
    compression: Literal["zstd", "lz4", "none"] = "zstd"
    request_timeout_s: float = Field(default=10.0, gt=0, description="Longest wait for one broker request, for "
                                     "reaching a broker at all, and for the acknowledgement of a batch.")
    session_timeout_ms: int = Field(default=10_000, ge=1000, description="Consumer group session timeout.")
    heartbeat_interval_ms: int = Field(default=3_000, ge=100, description="Consumer group heartbeat interval.")
    leave_group_on_close: bool = Field(default=True, description="An ingester that stops sends a LeaveGroup "
                                       "request, so its partitions move at once; False: they move when its "
                                       "session times out. False against Tansu 0.6, whose group never forms "
                                       "again after the leader of a forming group leaves it.")
    group_instance_id: str | None = Field(default=None, min_length=1, description="Static group membership "
                                          "(KIP-345): a member that restarts with the same id within the session "
                                          "timeout gets its partitions back without a rebalance; each ingester of "
                                          "a group needs its own. None: dynamic membership.")

    spool_dir: Path = Field(default_factory=_default_spool_dir, description="Where the sink spools messages while "
                            "the broker is unreachable (one folder per engine).")
    spool_max_bytes: int = Field(default=1024**3, ge=1024, description="Spool size at which new messages are "
                                 "dropped (counted) instead of spooled.")
    reconnect_max_s: float = Field(default=30.0, gt=0, description="Longest pause between reconnection attempts.")

    @model_validator(mode="after")
    def _check_auth(self) -> KafkaSettings:
        sasl = self.security_protocol.startswith("SASL")
        if sasl and (self.sasl_mechanism is None or self.sasl_username is None or self.sasl_password is None):
            raise ValueError(f"security_protocol {self.security_protocol} needs SPECMETRICS_KAFKA_SASL_MECHANISM, "
                             "SPECMETRICS_KAFKA_SASL_USERNAME and SPECMETRICS_KAFKA_SASL_PASSWORD")
        if not sasl and self.sasl_mechanism is not None:
            raise ValueError("SPECMETRICS_KAFKA_SASL_MECHANISM needs security_protocol SASL_PLAINTEXT or SASL_SSL")
        return self

    def client_config(self) -> dict[str, Any]:
        """Connection keyword arguments for every kafka-python client."""
        config: dict[str, Any] = {
            "security_protocol": self.security_protocol,
            "request_timeout_ms": int(self.request_timeout_s * 1000),
            "bootstrap_timeout_ms": int(self.request_timeout_s * 1000),
        }
        if self.sasl_mechanism is not None:
            config["sasl_mechanism"] = self.sasl_mechanism
            config["sasl_plain_username"] = self.sasl_username
            config["sasl_plain_password"] = self.sasl_password.get_secret_value() if self.sasl_password else None
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
            value = getattr(self, name)
            if value is not None:
                config[name] = str(value)
        if self.ssl_password is not None:
            config["ssl_password"] = self.ssl_password.get_secret_value()
        return config

    @property
    def compression_type(self) -> str | None:
        return None if self.compression == "none" else self.compression
