"""Kafka settings: credentials from config only, never in reprs, logs or errors."""

from __future__ import annotations

import os

import pytest
from pydantic import ValidationError

from specmetrics.transport.kafka import KafkaSettings


def test_sasl_settings_come_from_the_environment_and_are_never_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECMETRICS_KAFKA_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("SPECMETRICS_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("SPECMETRICS_KAFKA_SASL_USERNAME", "ingest")
    monkeypatch.setenv("SPECMETRICS_KAFKA_SASL_PASSWORD", "hunter2")
    monkeypatch.setenv("SPECMETRICS_KAFKA_SSL_CAFILE", "/etc/ssl/kafka-ca.pem")
    settings = KafkaSettings()
    config = settings.client_config()
    assert config["security_protocol"] == "SASL_SSL" and config["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (config["sasl_plain_username"], config["sasl_plain_password"]) == ("ingest", "hunter2")
    assert config["ssl_cafile"] == "/etc/ssl/kafka-ca.pem"
    assert "hunter2" not in repr(settings) and "hunter2" not in str(settings.model_dump())


def test_a_sasl_protocol_without_credentials_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECMETRICS_KAFKA_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    with pytest.raises(ValidationError, match="needs SPECMETRICS_KAFKA_SASL_MECHANISM"):
        KafkaSettings()


@pytest.mark.parametrize(("protocol", "mechanism"), [("SASL_SSL", None), ("PLAINTEXT", "PLAIN")])
def test_incomplete_sasl_settings_are_refused_without_echoing_the_password(
    monkeypatch: pytest.MonkeyPatch, protocol: str, mechanism: str | None
) -> None:
    for name in [name for name in os.environ if name.startswith("SPECMETRICS_KAFKA_")]:
        monkeypatch.delenv(name)  # the error's summary of the input keeps its start and end: the password
    monkeypatch.setenv("SPECMETRICS_KAFKA_SECURITY_PROTOCOL", protocol)
    if mechanism is not None:
        monkeypatch.setenv("SPECMETRICS_KAFKA_SASL_MECHANISM", mechanism)
    monkeypatch.setenv("SPECMETRICS_KAFKA_SASL_USERNAME", "alice")
    monkeypatch.setenv("SPECMETRICS_KAFKA_SASL_PASSWORD", "hunter2")
    with pytest.raises(ValidationError, match="SASL") as info:
        KafkaSettings()
    assert "hunter2" not in str(info.value) and "hunter2" not in repr(info.value)
