"""Every benchmark runs on small inputs and refuses bad arguments clearly, so none can rot
between the runs that fill BENCHMARKS.md."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Each benchmark with small arguments, and the fields its last JSON line must hold.
SMALL_RUNS: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "bench_wire": (["--steps", "5"], ("encode_rows_per_s", "vs_pydantic_json")),
    "bench_ingest": (["--rows", "3000", "--rounds", "1", "--flush-rows", "1000", "--s3"],
                     ("e2e_rows_per_s", "e2e_vs_plain_write", "s3_vs_local_table")),
    "bench_truth": (["--rows", "3000"], ("matches_truth",)),
    "bench_table": (["--files", "20", "--rounds", "1"], ("convert_s", "table_select_s", "table_connect_s")),
    "bench_kafka": (["--rows", "3000", "--rounds", "1", "--naive-rows", "500"], ("e2e_rows_per_s", "e2e_vs_naive")),
    "bench_hook_v2": (["--calls", "50"], ("hook_us_per_step",)),
    "bench_hook": (["--k", "3", "--max-tokens", "4"], ("hook_vs_vllm", "hook_vs_engine_step")),
    "bench_churn": (["--changes", "1", "--interval", "10", "--settings", "short"], ("settled", "settle_median_s")),
    "bench_optimize": (["--rows", "20000", "--rows-per-file", "5000", "--rounds", "1"],
                       ("specmetrics_s", "delta_rs_s", "specmetrics_distinct", "delta_rs_files_naming_offsets")),
}


def run_benchmark(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", f"benchmarks.{name}", *args], check=False, cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})


def json_lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("name", sorted(SMALL_RUNS))
def test_each_benchmark_runs_on_small_inputs(name: str) -> None:
    args, fields = SMALL_RUNS[name]
    done = run_benchmark(name, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    last = json_lines(done.stdout)[-1]
    assert set(fields) <= set(last), last
    assert last.get("matches_truth", True) is True


def test_report_benchmark_rounds_any_row_count_to_whole_steps(tmp_path: Path) -> None:
    done = run_benchmark("bench_report", "--rows", "5000", "--rounds", "1", "--dir", str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "--rows 5,000 rounded down to 4,480: 10 files of whole 64-request steps" in done.stderr
    result = json_lines(done.stdout)[-1]
    assert result["rows"] == 4_480
    assert result["results_agree"] is True
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows-4480"]


def test_report_benchmark_refuses_fewer_rows_than_one_step_per_file(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import bench_report

    with pytest.raises(SystemExit) as exit_:
        bench_report.main(["--rows", "639"])
    assert exit_.value.code == 2
    assert "--rows must be at least 640" in capsys.readouterr().err


@pytest.mark.parametrize(("name", "option"), [
    ("bench_wire", "--steps"), ("bench_ingest", "--rows"), ("bench_ingest", "--rounds"),
    ("bench_ingest", "--flush-rows"), ("bench_truth", "--rows"), ("bench_table", "--files"),
    ("bench_kafka", "--batch-size"), ("bench_report", "--rows"), ("bench_report", "--rounds"),
    ("bench_hook_v2", "--calls"), ("bench_hook", "--max-tokens"), ("bench_hook", "--k"),
    ("bench_churn", "--changes"), ("bench_churn", "--interval"), ("bench_chaos", "--storm-s"),
    ("bench_chaos", "--engines"), ("bench_chaos", "--deadline-s"),
])
@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_sizes_must_be_positive_whole_numbers(name: str, option: str, value: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    module = importlib.import_module(f"benchmarks.{name}")
    with pytest.raises(SystemExit) as exit_:
        module.main([option, value])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert f"argument {option}" in error
    assert ("is not a positive number" if value != "many" else "is not a whole number") in error
