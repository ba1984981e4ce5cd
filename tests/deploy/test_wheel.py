"""The distribution installs one top-level package, ``specmetrics``: built as a wheel and installed
into a fresh venv beside another distribution that owns a top-level ``queries`` (as PyPI's
PostgreSQL library does), both import, each its own, and vLLM finds the plugin's entry point."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from tests.support.layout import FLOW

ROOT = Path(__file__).resolve().parents[2]
OTHER = {  # a distribution of its own whose package is named like one of the product's folders
    "pyproject.toml": '[build-system]\nrequires = ["setuptools>=77"]\nbuild-backend = "setuptools.build_meta"\n'
                      '[project]\nname = "other-queries"\nversion = "1.0"\n',
    "queries/__init__.py": 'OWNER = "other-queries"\n',
}
CHECK = """
import importlib.metadata as metadata, pathlib, queries, specmetrics.queries
from specmetrics.queries.docs import render  # reads every SQL file of the package
from specmetrics.schemas import SCHEMA_VERSION
site = pathlib.Path(specmetrics.__file__).parents[1]
assert queries.OWNER == "other-queries" and pathlib.Path(queries.__file__).parent == site / "queries"
assert pathlib.Path(specmetrics.queries.__file__).parent == site / "specmetrics" / "queries"
assert "acceptance_vllm" in render() and SCHEMA_VERSION
[plugin] = metadata.entry_points(group="vllm.general_plugins", name="specmetrics")
assert plugin.value == "specmetrics.emitter.plugin:register" and callable(plugin.load())
print(sorted(metadata.distribution("specmetrics").read_text("top_level.txt").split()))
"""


def build_wheel(project: Path, out: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(out), str(project)], check=True, capture_output=True, timeout=300)
    [wheel] = out.glob("*.whl")
    return wheel


def source_tree(out: Path) -> Path:
    """What the images build the wheel from (docker/app.Dockerfile's COPY lines), copied: a build
    writes its build/ and egg-info into the tree it builds."""
    out.mkdir(parents=True, exist_ok=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, out / name)
    for package in (package for level in FLOW for package in level):
        shutil.copytree(ROOT / package, out / package, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    return out


def test_the_wheel_installs_one_package_beside_another_top_level_queries(tmp_path: Path) -> None:
    other = tmp_path / "other-queries"
    for name, text in OTHER.items():
        (other / name).parent.mkdir(parents=True, exist_ok=True)
        (other / name).write_text(text)
    ours = build_wheel(source_tree(tmp_path / "source"), tmp_path / "ours")
    theirs = build_wheel(other, tmp_path / "theirs")
    names = zipfile.ZipFile(ours).namelist()
    assert {name.split("/")[0] for name in names if ".dist-info/" not in name} == {"specmetrics"}
    assert {"specmetrics/emitter/vllm/scheduler.py", "specmetrics/queries/sql/metrics/acceptance.sql"} <= set(names)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(ours), str(theirs)],
                   check=True, capture_output=True, timeout=300)
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    # The dependencies (pydantic, pyarrow, duckdb, ...) from this venv: its folder on the path, after the
    # fresh venv's own (no .pth file of this venv runs there, so no editable install of the checkout).
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    done = subprocess.run([python, "-c", CHECK], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["['specmetrics']"]
