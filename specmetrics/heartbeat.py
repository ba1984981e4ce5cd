"""A liveness file: a long-running command rewrites it while its loop runs; a healthcheck
reads its age (``specmetrics health``)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


class Heartbeat:
    """Rewrites ``path`` (JSON: the time and whatever details it is given) at most once every
    ``interval_s``; the write is atomic (temp file and rename), so a reader never sees half a file."""

    def __init__(self, path: Path, interval_s: float = 1.0) -> None:
        self.path = path
        self.interval_s = interval_s
        self._last = float("-inf")
        path.parent.mkdir(parents=True, exist_ok=True)

    def beat(self, details: dict[str, Any] | None = None) -> None:
        now = time.monotonic()
        if now - self._last < self.interval_s:
            return
        self._last = now
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(json.dumps({"time": time.time(), "pid": os.getpid(), **(details or {})}) + "\n")
        os.replace(tmp, self.path)


def heartbeat_age_s(path: Path) -> float:
    """Seconds since ``path`` was last written; raises ``FileNotFoundError`` if it does not exist."""
    return max(0.0, time.time() - path.stat().st_mtime)
