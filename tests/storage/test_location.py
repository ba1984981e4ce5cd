"""Where an output lives (storage.location): S3 URLs, and the endpoint, region and credentials from
SPECMETRICS_S3_*, the AWS environment and the AWS files, in that order, never shown."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from devtools.s3_server import ADMIN, SeaweedS3
from specmetrics.storage.location import S3Credentials, S3Location, S3Settings, create_bucket, is_s3
from specmetrics.storage.table import is_table

AWS_VARIABLES = ("AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                 "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE")


@pytest.fixture
def aws_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name in ("ENDPOINT", "REGION", "ACCESS_KEY_ID", "SECRET_ACCESS_KEY", "SESSION_TOKEN"):
        monkeypatch.delenv(f"SPECMETRICS_S3_{name}", raising=False)
    (tmp_path / "credentials").write_text(
        "[default]\naws_access_key_id = file-key\naws_secret_access_key = file-secret\n"
        "[other]\naws_access_key_id = other-key\naws_secret_access_key = other-secret\n")
    (tmp_path / "config").write_text("[default]\nregion = eu-west-1\n[profile other]\nregion = ap-south-1\n"
                                     "endpoint_url = http://other:9000\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    return tmp_path


def test_an_s3_url_names_a_bucket_and_a_prefix(aws_home: Path) -> None:
    location = S3Location.parse("s3://metrics/prod/specmetrics/")
    assert (location.bucket, location.prefix, location.url) == ("metrics", "prod/specmetrics", "s3://metrics/prod/specmetrics")
    assert location.key("dt=2026-12-01/hour=07/x.parquet") == "metrics/prod/specmetrics/dt=2026-12-01/hour=07/x.parquet"
    assert S3Location.parse("s3://metrics").key("x") == "metrics/x"
    assert is_s3("s3://metrics") and not is_s3(Path("/data"))
    for bad in ("s3://", "s3:///prefix", "s3://bucket/../etc", "/data"):
        with pytest.raises(ValueError, match="S3 URL"):
            S3Location.parse(bad)


def test_credentials_come_from_the_overrides_then_the_environment_then_the_files(
        aws_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = S3Credentials.resolve()
    assert (files.endpoint, files.region) == (None, "eu-west-1")
    assert (files.access_key_id, files.secret_access_key) is not None
    assert files.access_key_id is not None and files.access_key_id.get_secret_value() == "file-key"
    monkeypatch.setenv("AWS_PROFILE", "other")
    other = S3Credentials.resolve()
    assert (other.endpoint, other.region) == ("http://other:9000", "ap-south-1")
    assert other.secret_access_key is not None and other.secret_access_key.get_secret_value() == "other-secret"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "env-key")
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    env = S3Credentials.resolve()
    assert env.access_key_id is not None and env.access_key_id.get_secret_value() == "env-key"
    assert env.region == "us-west-2"
    monkeypatch.setenv("SPECMETRICS_S3_ACCESS_KEY_ID", "own-key")
    monkeypatch.setenv("SPECMETRICS_S3_ENDPOINT", "http://127.0.0.1:8333")
    own = S3Credentials.resolve(S3Settings())
    assert own.access_key_id is not None and own.access_key_id.get_secret_value() == "own-key"
    assert own.endpoint == "http://127.0.0.1:8333"


def test_secrets_are_never_shown(aws_home: Path) -> None:
    location = S3Location.parse("s3://metrics/prod")
    shown = f"{location!r} {location} {location.credentials!r}"
    assert "file-secret" not in shown and "file-key" not in shown
    options = location.storage_options()
    assert options["AWS_SECRET_ACCESS_KEY"] == "file-secret"  # handed to the client, and only there
    assert options["AWS_CONDITIONAL_PUT"] == "etag"


def test_a_missing_bucket_is_created_only_with_a_right_to_create_it(
        s3_server: SeaweedS3, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = f"made-{uuid.uuid4().hex[:8]}"
    for name, value in s3_server.environment().items():
        monkeypatch.setenv(name, value)
    with pytest.raises(OSError, match=rf"^s3://{bucket}/data: access denied"):
        create_bucket(S3Location.parse(f"s3://{bucket}/data"))  # the writer's identity: no bucket creation
    monkeypatch.setenv("SPECMETRICS_S3_ACCESS_KEY_ID", ADMIN[0])
    monkeypatch.setenv("SPECMETRICS_S3_SECRET_ACCESS_KEY", ADMIN[1])
    location = S3Location.parse(f"s3://{bucket}/data")
    with pytest.raises(OSError, match="the bucket does not exist"):
        is_table(location)
    assert create_bucket(location) is True
    assert not is_table(location)  # the bucket exists now: a prefix without a table
    assert create_bucket(location) is False  # there already
