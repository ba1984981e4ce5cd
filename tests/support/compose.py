"""The compose file as the tests see it: resolved by ``docker-compose config`` (the real
interpolation and merge rules, no Docker engine needed), and its services turned into plain
processes on this machine."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
S3_OVERRIDE = ROOT / "docker-compose.s3.yml"  # the stored data on an object store
EMPTY_ENV_FILE = Path(__file__).with_name("empty.env")
COMPOSE_HOST = "kafka:9092"  # the broker address inside the stack


def venv_tool(name: str) -> Path:
    """A command installed next to this Python (``make .venv/.installed-dev`` installs them)."""
    path = Path(sys.executable).parent / name
    if not path.exists():
        raise AssertionError(f"{path} is missing: run 'make .venv/.installed-dev'")
    return path


def compose(*args: str, env: dict[str, str] | None = None, profiles: tuple[str, ...] = (),
            overrides: tuple[Path, ...] = ()) -> str:
    """Run ``docker-compose -f docker-compose.yml [-f OVERRIDE ...] [--profile P ...] ARGS`` with no
    variables but ``env`` (neither this shell's nor a .env file's)."""
    profile_args = [a for p in profiles for a in ("--profile", p)]
    file_args = [a for f in (COMPOSE_FILE, *overrides) for a in ("-f", str(f))]
    result = subprocess.run(
        [str(venv_tool("docker-compose")), *file_args, "--env-file", str(EMPTY_ENV_FILE), *profile_args, *args],
        cwd=ROOT, env={"PATH": os.environ["PATH"], **(env or {})}, capture_output=True, text=True, timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def resolved_services(*profiles: str, env: dict[str, str] | None = None,
                      overrides: tuple[Path, ...] = ()) -> dict[str, dict[str, Any]]:
    """The services ``docker compose [-f OVERRIDE ...] --profile P ... up`` starts (those without
    profiles, and those in one of ``profiles``), fully interpolated with ``env``."""
    config: dict[str, Any] = yaml.safe_load(compose("config", env=env, overrides=overrides))
    return {name: service for name, service in config["services"].items()
            if not service.get("profiles") or set(service["profiles"]) & set(profiles)}


@functools.cache
def all_services() -> dict[str, dict[str, Any]]:
    """Every service of every profile, with the defaults of the compose file."""
    return resolved_services("gpu", "cpu", "demo", "monitoring")


def bind_mounts(service: dict[str, Any]) -> dict[str, tuple[Path, str]]:
    """target -> (host path, mode) of the service's bind mounts (the resolved file gives their
    sources as absolute paths; named volumes are left out)."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target, mode = volume.split(":")
        if source.startswith("/"):
            mounts[target] = (Path(source), mode)
    return mounts


def specmetrics_argv(service: dict[str, Any]) -> list[str] | None:
    """The service's command if it runs ``specmetrics`` (entrypoint and command together)."""
    argv = [*(service.get("entrypoint") or []), *(service.get("command") or [])]
    return argv if argv and argv[0] == "specmetrics" else None


def healthcheck_argv(service: dict[str, Any]) -> list[str] | None:
    test = (service.get("healthcheck") or {}).get("test")
    if not test or test[0] != "CMD":
        return None
    argv: list[str] = test[1:]
    return argv


class HostProcess:
    """One compose service as a plain process: the broker address replaced with the test
    broker's, each volume and tmpfs mount with a folder under ``root``."""

    def __init__(self, service: dict[str, Any], bootstrap: str, root: Path) -> None:
        self.bootstrap = bootstrap
        self.mounts: dict[str, Path] = {}
        for volume in service.get("volumes", []):
            name, target = volume.split(":")[:2]
            self.mounts[target] = root / "volumes" / name
        for target in service.get("tmpfs", []):
            self.mounts[target] = root / "tmpfs" / target.strip("/").replace("/", "_")
        for folder in self.mounts.values():
            folder.mkdir(parents=True, exist_ok=True)
        argv = specmetrics_argv(service)
        assert argv is not None, service
        self.argv = self.local(argv)
        host = {k: v for k, v in os.environ.items() if not k.startswith("SPECMETRICS_")}
        service_env = {k: self.local([str(v)])[0] for k, v in (service.get("environment") or {}).items()
                       if v is not None}
        self.env = {**host, **service_env, "PYTHONPATH": str(ROOT)}

    def local(self, values: list[str]) -> list[str]:
        """``values`` with the broker address and the mount targets of this machine."""
        out = []
        for value in values:
            local = value.replace(COMPOSE_HOST, self.bootstrap)
            for target in sorted(self.mounts, key=len, reverse=True):
                if local == target or local.startswith(target + "/"):
                    local = str(self.mounts[target]) + local[len(target):]
                    break
            out.append(local)
        return out

    def start(self) -> subprocess.Popen[str]:
        return subprocess.Popen(_python(self.argv), cwd=ROOT, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def run(self, argv: list[str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run the service's command, or ``argv`` (mapped like it) in the service's environment."""
        return subprocess.run(_python(self.local(argv) if argv else self.argv), cwd=ROOT, env=self.env,
                              capture_output=True, text=True, timeout=timeout, check=False)


def _python(argv: list[str]) -> list[str]:
    """``specmetrics ...`` as this Python runs it."""
    assert argv[0] == "specmetrics", argv
    return [sys.executable, "-m", "specmetrics.cli", *argv[1:]]
