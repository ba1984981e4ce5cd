"""The Makefile's install steps, run for real in the order a user runs the targets, leave a venv
in which vLLM imports (PyPI's torchvision beside the CPU torch breaks it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(sys.prefix)
#: The targets users run, in the README's order; each installs what it needs first.
TARGETS = ("demo", "lint", "test", "bench")


def install_steps(target: str) -> list[str]:
    """The pip commands ``make TARGET`` runs when pyproject.toml has changed (dry run)."""
    dry_run = subprocess.run(["make", "-n", "-W", "pyproject.toml", f"VENV={VENV}", target], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout
    commands = dry_run.replace("\\\n", " ").splitlines()
    return [command for command in commands if " -m pip " in command]


def test_install_steps_of_every_target_in_order_leave_vllm_importable() -> None:
    steps = {target: install_steps(target) for target in TARGETS}
    assert all(steps.values()), steps  # every target installs what it needs
    assert any("'.[dev,kafka,bench]'" in step for step in steps["bench"])  # the benchmarks' extras are in it
    previous: list[str] = []
    for target in TARGETS:
        if steps[target] == previous:  # the same recipe again (a stamp shared by lint, test and bench)
            continue
        for step in steps[target]:
            done = subprocess.run(step, shell=True, check=False, cwd=ROOT, capture_output=True, text=True)
            assert done.returncode == 0, f"make {target}: {step}\n{done.stderr[-2000:]}"
        previous = steps[target]
    check = subprocess.run([sys.executable, "scripts/check_venv.py"], check=False, cwd=ROOT, capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stderr
    imports = subprocess.run(
        [sys.executable, "-c", "import vllm._custom_ops; from vllm import LLM; "
                               "from vllm.model_executor.models.llama import LlamaForCausalLM"],
        check=False, cwd=ROOT, capture_output=True, text=True)
    assert imports.returncode == 0, imports.stderr[-2000:]


def test_check_venv_names_the_packages_that_break_vllm_and_the_fix(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "torchvision-0.28.0.dist-info").mkdir(parents=True)
    (site / "torchvision-0.28.0.dist-info" / "METADATA").write_text("Name: torchvision\nVersion: 0.28.0\n")
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_venv.py")], check=False,
                          capture_output=True, text=True, env={"PYTHONPATH": str(site)})
    assert done.returncode == 1
    assert "torchvision 0.28.0" in done.stderr
    assert "pip uninstall -y torchvision torchaudio torchcodec" in done.stderr
