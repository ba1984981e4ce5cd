"""docker-compose.s3.yml's s3 service on a real Docker engine (SeaweedFS; a stand-in image where
chrislusf/seaweedfs cannot be pulled, tests/support/docker_engine.py): its entrypoint makes the one
identity from .env's keys and refuses to start without them, the ingester creates the bucket as the
override file says, and the table survives a restart of the service in its s3-data volume."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from devtools.ports import free_port
from specmetrics.cli import main
from specmetrics.storage.location import S3Location
from specmetrics.storage.table import is_table
from tests.support.compose import S3_OVERRIDE, resolved_services
from tests.support.docker_engine import COMPOSE_FILE, compose_project, docker, prepare_seaweedfs
from tests.support.ingest import rows_once
from tests.support.loadgen import write_load
from tests.support.metrics import wait_for

PROJECT = "specmetrics-s3test"
KEY, SECRET = "stack-writer", "stack-secret-4c8e1f0a9b"
URL = "s3://specmetrics/data"  # S3_DATA_URL's default


def readable() -> bool:
    """Whether the table reads: after a restart SeaweedFS answers InternalError for a few seconds,
    until each bucket's volumes are back."""
    try:
        rows_once(URL)
    except (OSError, duckdb.Error):
        return False
    return True


def test_the_s3_service_takes_its_keys_from_env_and_keeps_the_table_across_a_restart(
        docker_engine: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = [COMPOSE_FILE, S3_OVERRIDE, *prepare_seaweedfs()]
    port = free_port()
    keyless = compose_args(files, tmp_path / "keyless.env", {"S3_HOST_PORT": port})
    refused = docker(*keyless, "run", "--rm", "--no-deps", "s3", timeout=120, check=False)
    assert refused.returncode != 0 and "set SPECMETRICS_S3_ACCESS_KEY_ID in .env" in refused.stderr, refused.stderr

    env = {"SPECMETRICS_S3_ACCESS_KEY_ID": KEY, "SPECMETRICS_S3_SECRET_ACCESS_KEY": SECRET, "S3_HOST_PORT": port}
    with compose_project(PROJECT, files, tmp_path / "s3.env", (), env, ("s3",)) as stack:
        wait_for(lambda: stack.state("s3").get("Health") == "healthy", 120, "the s3 service's healthcheck", 1)
        ingest = resolved_services(overrides=(S3_OVERRIDE,))["ingest"]["environment"]
        for name, value in {"SPECMETRICS_S3_ENDPOINT": f"http://127.0.0.1:{port}", "SPECMETRICS_S3_REGION":
                            "us-east-1", "SPECMETRICS_S3_ACCESS_KEY_ID": KEY, "SPECMETRICS_S3_SECRET_ACCESS_KEY":
                            SECRET, "SPECMETRICS_S3_CREATE_BUCKET": ingest["SPECMETRICS_S3_CREATE_BUCKET"]}.items():
            monkeypatch.setenv(name, value)
        write_load(tmp_path / "log", rows=64 * 30, seed=35)
        assert main(["ingest", "--source", (tmp_path / "log").as_uri(), "--out", URL, "--state-dir",
                     str(tmp_path / "state"), "--once", "--quiet", "--flush-rows", "640"]) == 0  # makes the bucket
        stack("restart", "s3", timeout=180)
        wait_for(readable, 60, "the table to read again", 0.5)
        assert rows_once(URL) == 64 * 30  # kept in the s3-data volume
        monkeypatch.setenv("SPECMETRICS_S3_SECRET_ACCESS_KEY", "not-the-stack-secret")
        with pytest.raises(OSError, match="wrong credentials"):
            is_table(S3Location.parse(URL))


def compose_args(files: list[Path], env_file: Path, env: dict[str, object]) -> list[str]:
    """``compose -p PROJECT -f ... --env-file ENV`` with ``env`` written to ``env_file``."""
    env_file.write_text("".join(f"{name}={value}\n" for name, value in env.items()))
    return ["compose", "-p", PROJECT, *(a for f in files for a in ("-f", str(f))), "--env-file", str(env_file)]
