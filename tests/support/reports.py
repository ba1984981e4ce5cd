"""The report tests' time: the hour their small tree (the ``report_tree`` fixture) starts at."""

from __future__ import annotations

from datetime import datetime

T = datetime(2025, 1, 1, 10, 0)
