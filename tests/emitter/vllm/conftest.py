"""Fixtures for the real vLLM runs (tests.support.vllm): the tiny local models, and the cycle targets
with their exact drafters."""

from __future__ import annotations

from pathlib import Path

import pytest

from specmetrics.cycle_models import cycle_models
from specmetrics.tiny_models import tiny_models


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = tmp_path_factory.mktemp("models")
    tiny_models(cache)
    cycle_models(cache)
    return cache
