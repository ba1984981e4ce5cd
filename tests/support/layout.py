"""The data flow the packages import along (tests/test_layout.py checks it; tests/test_mirror.py
reads the product packages from it)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FLOW: tuple[tuple[str, ...], ...] = (
    ("schemas",),
    ("transport", "storage"),
    ("emitter", "ingest"),
    ("queries",),
    ("reports", "monitoring"),
    ("specmetrics",),
)
