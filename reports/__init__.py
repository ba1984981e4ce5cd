"""Metric reports: the numbers of a time window (:mod:`.data`), inline-SVG charts
(:mod:`.charts`), Markdown and self-contained HTML (:mod:`.render`), files on disk
(:mod:`.writer`) and schedules (:mod:`.schedule`)."""

from specmetrics.reports.data import ReportData, Window, collect
from specmetrics.reports.schedule import Schedule, parse_duration, parse_schedule
from specmetrics.reports.writer import FORMATS, parse_formats, write_report

__all__ = ["FORMATS", "ReportData", "Schedule", "Window", "collect", "parse_duration", "parse_formats",
           "parse_schedule", "write_report"]
