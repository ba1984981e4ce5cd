"""Fixtures for the tests on a real Docker engine: one engine for the session, started when the
machine runs none and stopped after."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.docker_engine import start_engine, stop_engine


@pytest.fixture(scope="session")
def docker_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    engine = start_engine(tmp_path_factory.mktemp("docker") / "dockerd.log")
    try:
        yield
    finally:
        stop_engine(engine)
