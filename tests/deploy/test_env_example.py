"""Every variable the code and the compose file read is documented in .env.example, and
every variable documented there is read by something."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

from pydantic_settings import BaseSettings

from tests.support.compose import COMPOSE_FILE, ROOT, S3_OVERRIDE, all_services, resolved_services
from tests.support.layout import FLOW

PACKAGES = tuple(package for level in FLOW for package in level)
COMPOSE_OWN = {"COMPOSE_PROFILES", "COMPOSE_PROJECT_NAME"}  # read by docker compose itself


def documented() -> set[str]:
    text = (ROOT / ".env.example").read_text()
    return set(re.findall(r"^#? ?([A-Z][A-Z0-9_]*)=", text, re.MULTILINE))


def source_files() -> list[Path]:
    return sorted(f for package in PACKAGES for f in (ROOT / package).rglob("*.py"))


def settings_variables() -> set[str]:
    """``<env_prefix><FIELD>`` of every pydantic-settings class in the packages."""
    names = set()
    for path in source_files():
        tree = ast.parse(path.read_text())
        classes = [node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
                   and any(isinstance(base, ast.Name) and base.id == "BaseSettings" for base in node.bases)]
        if not classes:
            continue
        module = importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
        for name in classes:
            cls = getattr(module, name)
            assert issubclass(cls, BaseSettings)
            prefix = cls.model_config.get("env_prefix", "")
            names |= {f"{prefix}{field}".upper() for field in cls.model_fields}
    return names


def literal_variables() -> set[str]:
    """``SPECMETRICS_*`` names written out in the code (``os.environ`` reads, messages)."""
    names = set()
    for path in source_files():
        names |= {n for n in re.findall(r"SPECMETRICS_[A-Z0-9_]+", path.read_text()) if not n.endswith("_")}
    return names


def compose_variables() -> set[str]:
    """Interpolated ``${NAME}`` and the variables the services take from the host (null values)."""
    names = {name for path in (COMPOSE_FILE, S3_OVERRIDE)
             for name in re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", path.read_text())}
    for service in [*all_services().values(), *resolved_services(overrides=(S3_OVERRIDE,)).values()]:
        names |= {k for k, v in (service.get("environment") or {}).items() if v is None or k.startswith("SPECMETRICS_")}
    return names


def test_settings_classes_are_found() -> None:
    assert {"SPECMETRICS_SINK", "SPECMETRICS_KAFKA_SASL_PASSWORD", "SPECMETRICS_INGEST_GROUP"} <= settings_variables()


def test_every_variable_the_code_reads_is_documented() -> None:
    assert settings_variables() | literal_variables() <= documented()


def test_every_variable_the_compose_file_uses_is_documented() -> None:
    assert compose_variables() <= documented()


def test_every_documented_variable_is_used() -> None:
    used = settings_variables() | literal_variables() | compose_variables() | COMPOSE_OWN
    assert documented() - used == set()


def test_no_secret_has_a_value_in_the_compose_file() -> None:
    for name, service in all_services().items():
        for key, value in (service.get("environment") or {}).items():
            if any(word in key for word in ("PASSWORD", "TOKEN", "SECRET")):
                assert value is None, f"{name}: {key} must come from the environment, not the compose file"
