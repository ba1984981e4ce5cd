"""docker-compose.yml without a Docker engine: the compose-spec schema, docker-compose's own
validation, profiles, and every specmetrics command and healthcheck against the real CLI."""

from __future__ import annotations

import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from specmetrics.cli import build_parser, main
from specmetrics.reports import parse_duration, parse_formats, parse_schedule
from tests.support.compose import (
    COMPOSE_FILE,
    ROOT,
    S3_OVERRIDE,
    all_services,
    bind_mounts,
    compose,
    healthcheck_argv,
    resolved_services,
    specmetrics_argv,
    venv_tool,
)


@pytest.mark.parametrize("path", [COMPOSE_FILE, S3_OVERRIDE], ids=lambda path: path.name)
def test_the_compose_files_match_the_compose_spec_schema(path: Path) -> None:
    result = subprocess.run([str(venv_tool("check-jsonschema")), "--builtin-schema", "vendor.compose-spec",
                             str(path)], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("profiles", [(), ("gpu",), ("cpu",), ("demo",), ("monitoring",),
                                      ("gpu", "cpu", "demo", "monitoring")])
def test_docker_compose_accepts_the_file_with_each_profile(profiles: tuple[str, ...]) -> None:
    compose("config", "-q", profiles=profiles)  # also catches a depends_on naming an undefined service


def test_profiles_choose_what_produces_step_events() -> None:
    base = {"kafka", "kafka-init", "ingest", "reports", "reports-web", "maintenance"}
    assert set(resolved_services()) == base
    assert set(resolved_services("gpu")) == base | {"vllm"}
    assert set(resolved_services("cpu")) == base | {"vllm-cpu"}
    assert set(resolved_services("demo")) == base | {"loadgen"}
    assert set(resolved_services("demo", "monitoring")) == base | {"loadgen", "prometheus", "grafana"}


def test_the_gpu_service_reserves_a_gpu_and_both_vllm_services_send_to_the_stack_topic() -> None:
    services = all_services()
    devices = services["vllm"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}]
    assert "deploy" not in services["vllm-cpu"]
    for name in ("vllm", "vllm-cpu"):
        env = services[name]["environment"]
        assert env["SPECMETRICS_SINK"] == "kafka://kafka:9092/specmetrics.steps"
        assert env["SPECMETRICS_KAFKA_SPOOL_DIR"].startswith("/var/lib/specmetrics/")
        assert services[name]["entrypoint"] == ["vllm", "serve"]
        assert "--speculative-config" in services[name]["command"]


def test_ingest_waits_for_a_healthy_broker_and_the_topics_and_keeps_its_data_on_a_named_volume() -> None:
    services = all_services()
    ingest = services["ingest"]
    assert ingest["depends_on"] == {"kafka": {"condition": "service_healthy"},
                                    "kafka-init": {"condition": "service_completed_successfully"}}
    assert ingest["restart"] == "unless-stopped"
    assert "data:/var/lib/specmetrics/data:rw" in ingest["volumes"]
    assert "data:/var/lib/specmetrics/data:rw" in services["reports"]["volumes"]  # it keeps the rollups current
    assert "reports:/var/lib/specmetrics/reports:ro" in services["reports-web"]["volumes"]
    assert "healthcheck" in services["kafka"]


def test_the_monitoring_services_mount_repository_files_read_only_and_publish_on_localhost() -> None:
    services = all_services()
    for name, config_targets in (("prometheus", {"/etc/prometheus/prometheus.yml", "/etc/prometheus/alerts.yml"}),
                                 ("grafana", {"/etc/grafana/provisioning", "/etc/grafana/dashboards"})):
        mounts = bind_mounts(services[name])
        assert set(mounts) == config_targets, name
        for target, (source, mode) in mounts.items():
            assert source.exists(), f"{name}: {source} (mounted at {target}) is missing"
            assert source.is_relative_to(ROOT / "docker" / "monitoring"), source
            assert mode == "ro", f"{name}: {target} is mounted {mode}"
        assert [port.split(":")[0] for port in services[name]["ports"]] == ["127.0.0.1"], name
    assert services["ingest"]["environment"]["SPECMETRICS_INGEST_METRICS_PORT"] == "9400"


SPECMETRICS_COMMANDS = [(name, kind, argv) for name, service in all_services().items()
                        for kind, argv in (("command", specmetrics_argv(service)),
                                           ("healthcheck", healthcheck_argv(service)))
                        if argv and argv[0] == "specmetrics"]


def test_the_stack_runs_specmetrics_in_each_app_service() -> None:
    commands = {(name, kind) for name, kind, _ in SPECMETRICS_COMMANDS}
    assert {(s, "command") for s in ("kafka-init", "ingest", "reports", "reports-web", "loadgen", "maintenance")} \
        <= commands
    assert ("ingest", "healthcheck") in commands


@pytest.mark.parametrize(("service", "kind", "argv"), SPECMETRICS_COMMANDS,
                         ids=[f"{name}-{kind}" for name, kind, _ in SPECMETRICS_COMMANDS])
def test_each_specmetrics_command_is_a_cli_subcommand_with_valid_options(
        service: str, kind: str, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    try:
        args = build_parser().parse_args(argv[1:])
    except SystemExit:
        pytest.fail(f"{service} {kind}: {argv} does not parse: {capsys.readouterr().err}")
    with pytest.raises(SystemExit) as exited:
        main([args.command, "--help"])
    assert exited.value.code == 0
    assert f"usage: specmetrics {args.command}" in capsys.readouterr().out
    if getattr(args, "every", None):  # values argparse takes as text: checked as the command checks them
        parse_schedule(args.every).next_after(datetime.now(UTC))
    if args.command == "report":
        parse_formats(args.format)
        assert parse_duration(args.since) > timedelta(0)


APP_DOCKERFILE = ROOT / "docker" / "app.Dockerfile"


def app_services() -> dict[str, dict[str, Any]]:
    """The services that run docker/app.Dockerfile's image."""
    return {name: service for name, service in all_services().items()
            if service.get("build", {}).get("dockerfile") == "docker/app.Dockerfile"}


def test_every_tmpfs_of_an_app_service_belongs_to_the_images_user() -> None:
    """A tmpfs mount comes up owned by root (mode 755) whatever the image's folder was: the ingest
    service, running as the image's user, could not write its heartbeat there and crash-looped
    (Docker 20.10, Compose v2.40). Each must name the user of docker/app.Dockerfile."""
    dockerfile = APP_DOCKERFILE.read_text()
    found = re.search(r"useradd\b.*--uid (\d+)", dockerfile)
    assert found is not None and "USER specmetrics" in dockerfile
    uid = found.group(1)
    app = app_services()
    mounts = {name: service.get("tmpfs", []) for name, service in app.items()}
    assert mounts["ingest"], "the ingest service keeps its heartbeat on a tmpfs"
    for name, entries in mounts.items():
        for entry in [entries] if isinstance(entries, str) else entries:
            options = dict(option.split("=", 1) for option in entry.partition(":")[2].split(",") if "=" in option)
            assert (options.get("uid"), options.get("gid")) == (uid, uid), f"{name}: {entry}"


def test_every_named_volume_an_app_service_writes_starts_out_owned_by_the_images_user() -> None:
    """Docker fills a new named volume from the image's folder, owner included: each volume an app
    service mounts read-write must be a folder the image creates and gives its user."""
    dockerfile = APP_DOCKERFILE.read_text()
    made = re.search(r"mkdir -p ([^\\&\n]+)", dockerfile)
    owned = re.search(r"chown -R specmetrics:specmetrics ([^\\&\n]+)", dockerfile)
    assert made is not None and owned is not None
    writable = [(name, volume.split(":")[1]) for name, service in app_services().items()
                for volume in service.get("volumes", []) if volume.endswith(":rw")]
    assert {target for _, target in writable} >= {"/var/lib/specmetrics/data", "/var/lib/specmetrics/reports"}
    for name, target in writable:
        assert target in made.group(1).split(), f"{name}: {target} is not made by the image"
        assert any(target == root or target.startswith(root + "/") for root in owned.group(1).split()), (name, target)


def test_the_s3_override_moves_the_stored_data_to_the_s3_service_and_holds_no_secret() -> None:
    base = resolved_services()
    services = resolved_services(overrides=(S3_OVERRIDE,))
    assert "s3" not in base and "/var/lib/specmetrics/data" in (specmetrics_argv(base["ingest"]) or [])
    for name in ("ingest", "reports", "maintenance"):
        argv = specmetrics_argv(services[name]) or []
        assert argv[argv.index("--out" if name == "ingest" else "--data") + 1] == "s3://specmetrics/data"
        assert services[name]["environment"]["SPECMETRICS_S3_ENDPOINT"] == "http://s3:8333"
    assert services["ingest"]["depends_on"]["s3"]["condition"] == "service_healthy"
    assert "s3-data:/data:rw" in services["s3"]["volumes"]
    for service in services.values():
        for key, value in (service.get("environment") or {}).items():
            if any(word in key for word in ("PASSWORD", "TOKEN", "SECRET", "ACCESS_KEY")):
                assert value is None, f"{key} must come from the environment, not the compose file"
