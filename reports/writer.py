"""Writing a report to a folder: timestamped files, and ``latest.html`` / ``latest.md`` replaced
atomically so a reader (the compose file server, a browser) never sees half a file."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from specmetrics.reports.data import ReportData
from specmetrics.reports.render import charts, html, markdown
from specmetrics.storage.durable import write_atomically

FORMATS: tuple[str, ...] = ("md", "html")
_STAMP = re.compile(r"^report-(\d{8}T\d{6}Z)[.-]")


def parse_formats(text: str) -> tuple[str, ...]:
    """``md,html`` → ("md", "html"); unknown names are a clear error."""
    names = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [n for n in names if n not in FORMATS]
    if unknown or not names:
        raise ValueError(f"unknown report format(s) {unknown or [text]}: choose from {', '.join(FORMATS)}")
    return names


def write_report(data: ReportData, out: Path, formats: Sequence[str], generated: datetime) -> list[Path]:
    """Write ``report-<UTC time>.<format>`` (and, for Markdown, its charts as SVG files) into
    ``out``, then point ``latest.<format>`` at the new content; returns the report files."""
    out.mkdir(parents=True, exist_ok=True)
    stem = f"report-{generated:%Y%m%dT%H%M%SZ}"
    drawn = charts(data)
    pages: dict[str, str] = {}
    if "html" in formats:
        pages["html"] = html(data, generated, drawn)
    if "md" in formats:
        chart_files = {chart.name: f"{stem}-{chart.name}.svg" for chart in drawn}
        for chart in drawn:
            write_atomically(out / chart_files[chart.name], chart.svg.encode())
        pages["md"] = markdown(data, generated, chart_files)
    written = []
    for suffix, page in pages.items():
        written.append(out / f"{stem}.{suffix}")
        write_atomically(written[-1], page.encode())
        write_atomically(out / f"latest.{suffix}", page.encode())
    return written


def prune_reports(out: Path, keep: int) -> list[Path]:
    """Delete the files of all but the newest ``keep`` reports (``report-<UTC time>*``: the
    reports and their charts; ``latest.*`` stay); returns what was deleted."""
    stamps = sorted({m.group(1) for p in out.glob("report-*") if (m := _STAMP.match(p.name))}, reverse=True)
    removed = []
    for stamp in stamps[keep:]:
        for path in out.glob(f"report-{stamp}*"):
            path.unlink()
            removed.append(path)
    return removed
