"""The load generator run into a local log, for tests that need realistic traffic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specmetrics.cli import build_parser
from specmetrics.commands.loadgen import spec_from_args
from specmetrics.emitter.loadgen import EngineTruth, LoadSpec, run_load
from specmetrics.emitter.sinks import LocalLogSink
from tests.support.events import T0


def write_load(log_dir: Path, **spec_fields: Any) -> dict[str, EngineTruth]:
    """Run the load generator into a local log; returns its ground truth."""
    spec_fields.setdefault("start_time", T0)
    with LocalLogSink(log_dir) as sink:
        return run_load(LoadSpec(**spec_fields), sink)


def rows_of(command: list[str], log_dir: Path) -> int:
    """The request-steps ``specmetrics loadgen ...`` (``command``, as a compose service or a container
    runs it) writes: the same spec and seed run here into a local log."""
    with LocalLogSink(log_dir) as sink:
        return sum(t.rows for t in run_load(spec_from_args(build_parser().parse_args(command[1:])), sink).values())
