"""Progress lines on stderr for long steps, at most one every ``interval_s``."""

from __future__ import annotations

import sys
import time


class Progress:
    """Prints ``<label>: <done> <unit> (<rate>/s)`` now and then, and once more at the end."""

    def __init__(self, label: str, unit: str = "rows", interval_s: float = 1.0, total: int | None = None) -> None:
        self.label, self.unit, self.interval_s, self.total = label, unit, interval_s, total
        self._start = self._last = time.monotonic()
        self._done = 0

    def update(self, done: int, total: int | None = None) -> None:
        """``done`` so far; ``total``, when given, replaces the expected total."""
        self._done = done
        if total is not None:
            self.total = total
        now = time.monotonic()
        if now - self._last >= self.interval_s:
            self._last = now
            self._print(now)

    def finish(self) -> None:
        self._print(time.monotonic())

    def _print(self, now: float) -> None:
        elapsed = max(now - self._start, 1e-9)
        of = f"/{self.total:,}" if self.total else ""
        rate = self._done / elapsed  # a file every few seconds is 0.3/s, not 0/s
        print(f"{self.label}: {self._done:,}{of} {self.unit} ({rate:,.{1 if rate < 10 else 0}f}/s, {elapsed:.1f}s)",
              file=sys.stderr, flush=True)
