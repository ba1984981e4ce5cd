"""The load generator run into a local log, for tests that need realistic traffic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emitter.loadgen import EngineTruth, LoadSpec, run_load
from emitter.sinks import LocalLogSink
from tests.support.events import T0


def write_load(log_dir: Path, **spec_fields: Any) -> dict[str, EngineTruth]:
    """Run the load generator into a local log; returns its ground truth."""
    spec_fields.setdefault("start_time", T0)
    with LocalLogSink(log_dir) as sink:
        return run_load(LoadSpec(**spec_fields), sink)
