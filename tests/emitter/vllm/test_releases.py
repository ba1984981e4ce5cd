"""The scheduler-side tests again, against the real code of each vLLM release after the venv's own.

Each run is a pytest process of its own with the release's ``vllm`` first on ``PYTHONPATH``
(tests/support/vllm_releases.py): vLLM's real ``Scheduler`` and ``AsyncScheduler`` with the plugin's
hooks, driven with model-runner outputs built as that release builds them (0.34.0 has no
``req_id_to_index``), the events checked against the release's own counters.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.vllm import ROOT
from tests.support.vllm_releases import RELEASES, imported_version, makefile_releases, release_env

SCHEDULER_SIDE = ("test_scheduler.py", "test_async_scheduler.py", "test_worker.py", "test_hook_guards.py",
                  "test_patching.py", "test_worker_v2.py", "test_config.py", "test_refusals.py", "test_stat_logger.py")
#: Per release, the tests whose vLLM code it no longer has, and why.
NOT_IN: dict[str, dict[str, str]] = {
    "0.34.0": {
        "test_worker.py::test_v1_worker_hooks_pass_on_parameters_a_later_vllm_adds":
            "the V1 model runner is removed (vllm/v1/worker/gpu_model_runner.py)",
        "test_worker_v2.py::test_v2_async_in_flight_placeholders_grammar_pads_and_dynamic_k_zero[grammar-pads]":
            "grammar_invalid_drafts is removed; async scheduling no longer pads grammar-invalid drafts",
        "test_worker_v2.py::test_adaptive_verification_budget_reaches_the_events[partial]":
            "a partial draft budget is admitted by a Triton kernel (assign_draft_token_budget), no CPU path",
    },
}


def test_make_test_installs_every_release_tested() -> None:
    assert makefile_releases() == RELEASES


@pytest.mark.parametrize("release", RELEASES)
def test_the_scheduler_side_tests_pass_on(release: str, tmp_path: Path) -> None:
    env = release_env(release)
    assert imported_version(env) == release
    here = Path(__file__).parent
    modules = [str(here / name) for name in SCHEDULER_SIDE]
    not_in = NOT_IN.get(release, {})
    deselect = [arg for test in not_in for arg in ("--deselect", str((here / test).relative_to(ROOT)))]
    # A base folder of its own: a nested pytest prunes the numbered folders of the one running it.
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "pytest"),
               *deselect, *modules]
    proc = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert " passed" in summary and "skipped" not in summary and "failed" not in summary, summary
    assert (f"{len(not_in)} deselected" in summary) if not_in else "deselected" not in summary, summary


def test_the_support_table_has_rows_for_every_release_tested_and_cites_tests_that_exist() -> None:
    """docs/plugin.md's table of supported versions: a row for the venv's release and each one tested
    here, each citing test files that exist; no row for a release that is not tested."""
    text = (ROOT / "docs" / "plugin.md").read_text()
    table = text[text.index("## Supported versions"):text.index("## Known gaps")]
    rows = [line.split("|")[1:-1] for line in table.splitlines() if line.startswith("| 0.")]
    releases = {cells[0].strip() for cells in rows}
    assert releases == {"0.32.0", *RELEASES}
    here = Path(__file__).parent
    for cells in rows:
        status = cells[-1]
        cited = re.findall(r"`((?:tests/[\w/.]*)|(?:test_\w+\.py))`", status)
        if "verified" in status.split(";")[0].split("(")[0].replace("not verified", ""):
            assert cited, cells
        assert all((ROOT / name).exists() or (here / name).is_file() for name in cited), cited
    for release in NOT_IN:  # what a release cannot run here is said in its rows
        assert "Not verified" in " ".join(cells[-1] for cells in rows if cells[0].strip() == release), release
