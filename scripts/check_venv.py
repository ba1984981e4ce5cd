"""Refuse to run tests or benchmarks in a venv where vLLM cannot import.

PyPI's torchvision, torchaudio and torchcodec, installed beside the CPU build of torch, make
every import of vLLM's models fail with "operator torchvision::nms does not exist". The
Makefile's install recipe removes them; anything installed by hand since may bring them back.
"""

from __future__ import annotations

import sys
from importlib import metadata

BREAKS_VLLM = ("torchvision", "torchaudio", "torchcodec")


def installed(names: tuple[str, ...]) -> list[str]:
    found = []
    for name in names:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return found


def main() -> int:
    found = installed(BREAKS_VLLM)
    if not found:
        return 0
    print(f"{sys.prefix} holds {', '.join(found)} beside the CPU build of torch: vLLM cannot import there "
          "('operator torchvision::nms does not exist'). Remove them with\n"
          f"  {sys.executable} -m pip uninstall -y {' '.join(BREAKS_VLLM)}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
