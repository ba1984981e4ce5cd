"""``specmetrics report``: files, latest.*, windows, the empty window, schedules that survive a
failed run."""

from __future__ import annotations

import html
import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from specmetrics import scheduled
from specmetrics.cli import main
from tests.support.ingest import ingest_once
from tests.support.loadgen import write_load
from tests.support.reports import T


def test_one_report_in_both_formats(report_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "reports"
    assert main(["report", "--data", str(report_tree), "--out", str(out)]) == 0
    assert "(9 request-steps)" in capsys.readouterr().out
    names = sorted(p.name for p in out.iterdir())
    stems = {re.sub(r"^(report-\d{8}T\d{6}Z).*", r"\1", n) for n in names if n.startswith("report-")}
    assert len(stems) == 1
    [stem] = stems
    assert names == sorted(["latest.html", "latest.md", f"{stem}.html", f"{stem}.md", *(
        f"{stem}-{chart}.svg" for chart in ("timeline", "positions", "context", "requests", "k_zero"))])
    assert (out / "latest.html").read_text() == (out / f"{stem}.html").read_text()
    md = (out / "latest.md").read_text()
    assert "| Acceptance rate | 75.00% | 42.86% |" in md
    assert f"![timeline]({stem}-timeline.svg)" in md
    assert "vLLM counted 3 request-steps without real drafts" in md


def test_the_report_says_who_paid_for_the_long_requests_and_which_requests_stand_out(
        tmp_path: Path, outcomes: Any) -> None:
    """K = 3, drafter 96. r1 accepts every draft, r2 none (group rate 0.5: both 50 points away);
    r1 was skipped twice beside a long request (collateral: 6 draft tokens lost, which it would have
    accepted: 30 of 54 draft tokens), r3 once for its own length."""
    o = outcomes
    rows = [*(o.drafted(3, 3, request_id="r1", event_time=T) for _ in range(8)),
            *(o.drafted(3, 0, request_id="r2", event_time=T) for _ in range(8)),
            *(o.skipped(3, request_id="r1", seq_len=60, event_time=T.replace(minute=1)) for _ in range(2)),
            o.skipped(3, request_id="r3", seq_len=120, event_time=T.replace(minute=1))]
    tree = o.write_table(tmp_path / "data", rows)
    out = tmp_path / "reports"
    assert main(["report", "--data", str(tree), "--out", str(out)]) == 0
    md = (out / "latest.md").read_text()
    assert "## Who paid for the long requests" in md
    assert "| a/dp0 | tiny-llama | draft\\_model | 3 | 3 | 2 | 0 | 66.67% | 6 | 6.000 | 50.00% | 55.56% |" in md
    assert ("2 requests with 8 drafts or more have an acceptance rate 30 points or more from their group's: "
            "1 below") in md
    assert {line.split(" | ")[1:3][0] for line in md.splitlines() if line.startswith("| a/dp0 | r")} == {"r1", "r2"}
    page = (out / "latest.html").read_text()
    assert 'id="collateral-table"' in page and 'id="outliers-table"' in page
    assert main(["report", "--data", str(tree), "--out", str(tmp_path / "lean"), "--no-requests"]) == 0
    lean = (tmp_path / "lean" / "latest.md").read_text()
    assert "Who paid" not in lean and "far from their group" not in lean and "![requests]" not in lean
    assert lean.split("## Per engine and model")[1].split("##")[0] == md.split("## Per engine and model")[1].split(
        "##")[0]


def test_window_and_format_options(report_tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "reports"
    assert main(["report", "--data", str(report_tree), "--out", str(out), "--format", "html",
                 "--since", T.replace(minute=2).isoformat(), "--until", "2025-01-01T10:04:00+00:00"]) == 0
    assert sorted(p.suffix for p in out.iterdir()) == [".html", ".html"]
    page = (out / "latest.html").read_text()
    assert "4 request-steps" in page
    assert "No drafts were made in this window" in page


def test_an_empty_window_is_a_clear_message(report_tree: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "reports"
    assert main(["report", "--data", str(report_tree), "--out", str(out), "--since", "2030-01-01"]) == 1
    assert "no request-steps from 2030-01-01 00:00:00 UTC" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--since", "yesterday"], "not a time or a duration: 'yesterday'"),
    (["--since", "2025-01-02", "--until", "2025-01-01"], "must be before --until"),
    (["--format", "pdf"], "unknown report format"),
    (["--every", "5 minutes"], "not a cron expression"),
    (["--bucket", "0m"], "not a duration"),
    (["--every", "0 0 30 2 *"], "never matches"),  # before the first run, not after it
    (["--every", "1h", "--runs", "0"], "--runs must be at least 1"),  # not a scheduled command that runs nothing
])
def test_bad_options_are_clear_errors(report_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      args: list[str], message: str) -> None:
    assert main(["report", "--data", str(report_tree), "--out", str(tmp_path / "r"), *args]) == 2
    assert message in capsys.readouterr().err


def test_a_bucket_too_narrow_for_the_window_is_a_clear_error(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """1 s buckets over 3 hours and 20 minutes of steps: 12,000 points, not a report of megabytes."""
    log, data, out = tmp_path / "log", tmp_path / "data", tmp_path / "reports"
    write_load(log, rows=64 * 200, seed=7, step_ms=60_000.0)  # a step a minute
    ingest_once(log, data, flush_rows=64 * 200)
    assert main(["report", "--data", str(data), "--out", str(out), "--format", "md", "--bucket", "1s"]) == 2
    assert "error: a bucket of 1 s gives 11,941 buckets from " in capsys.readouterr().err
    assert not out.exists()
    assert main(["report", "--data", str(data), "--out", str(out), "--format", "md", "--bucket", "1m"]) == 0
    [timeline] = out.glob("report-*-timeline.svg")
    assert "<title>Acceptance rate over time (1 min buckets)</title>" in timeline.read_text()


def test_scheduled_runs_write_timestamped_reports_and_an_empty_window_too(
        report_tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "reports"
    assert main(["report", "--data", str(report_tree), "--out", str(out), "--format", "html",
                 "--every", "1s", "--runs", "2"]) == 0
    assert len(list(out.glob("report-*.html"))) == 2
    empty = tmp_path / "empty"
    assert main(["report", "--data", str(report_tree), "--out", str(empty), "--format", "md", "--since", "2030-01-01",
                 "--every", "1s", "--runs", "1"]) == 0
    assert "No request-steps in this window" in (empty / "latest.md").read_text()


def test_a_failed_scheduled_run_is_logged_and_the_next_one_runs(
        tmp_path: Path, report_tree: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "later"  # missing at the first run, there at the second
    out = tmp_path / "reports"
    # the wait before the second run: the data directory appears meanwhile
    monkeypatch.setattr(scheduled, "_sleep_until", lambda when: report_tree.rename(data))
    with caplog.at_level(logging.ERROR, "specmetrics.report"):
        assert main(["report", "--data", str(data), "--out", str(out), "--format", "html",
                     "--every", "1h", "--runs", "2"]) == 0
    assert caplog.text.count("report run failed (the next one still runs): FileNotFoundError") == 1
    assert len(list(out.glob("report-*.html"))) == 1


def test_scheduled_runs_exit_1_when_the_last_failed_and_beat_only_after_a_report(
        tmp_path: Path, report_tree: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every run failing exits 1 and leaves no heartbeat, so neither a scheduler nor the container's
    healthcheck (specmetrics health) reads it as success; a failure followed by a report exits 0 and beats."""
    beat, out = tmp_path / "run" / "report.heartbeat", tmp_path / "reports"
    monkeypatch.setattr(scheduled, "_sleep_until", lambda when: None)
    args = ["report", "--out", str(out), "--format", "md", "--every", "1h", "--runs", "2",
            "--heartbeat-file", str(beat)]
    with caplog.at_level(logging.ERROR, "specmetrics.report"):
        assert main([*args[:1], "--data", str(tmp_path / "missing"), *args[1:]]) == 1
    assert caplog.text.count("report run failed") == 2 and not beat.exists()
    assert main(["health", "--heartbeat-file", str(beat)]) == 1

    data = tmp_path / "later"  # missing at the first run, there at the second
    monkeypatch.setattr(scheduled, "_sleep_until", lambda when: report_tree.rename(data))
    assert main([*args[:1], "--data", str(data), *args[1:]]) == 0
    assert json.loads(beat.read_text())["runs"] == 2
    assert main(["health", "--heartbeat-file", str(beat), "--max-age-s", "60"]) == 0


def test_a_single_report_beats_only_when_it_wrote_one(report_tree: Path, tmp_path: Path) -> None:
    beat = tmp_path / "report.heartbeat"
    assert main(["report", "--data", str(report_tree), "--out", str(tmp_path / "r"), "--since", "2030-01-01",
                 "--heartbeat-file", str(beat)]) == 1  # an empty window: no report
    assert not beat.exists()
    assert main(["report", "--data", str(report_tree), "--out", str(tmp_path / "r"),
                 "--heartbeat-file", str(beat)]) == 0
    assert beat.exists()


def test_keep_prunes_the_oldest_reports_and_their_charts(report_tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "reports"
    out.mkdir()
    for stamp in ("20250101T000000Z", "20250102T000000Z"):  # two older reports, one with a chart
        (out / f"report-{stamp}.html").write_text("old")
    (out / "report-20250101T000000Z-timeline.svg").write_text("old")
    (out / "notes.txt").write_text("not a report")
    assert main(["report", "--data", str(report_tree), "--out", str(out), "--keep", "2"]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert "report-20250101T000000Z.html" not in names and "report-20250101T000000Z-timeline.svg" not in names
    assert "report-20250102T000000Z.html" in names and "notes.txt" in names and "latest.html" in names
    assert len({n[:23] for n in names if n.startswith("report-")}) == 2


def test_scheduled_windows_end_at_the_scheduled_time(report_tree: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "reports"
    monkeypatch.setattr(scheduled, "_sleep_until", lambda when: None)
    assert main(["report", "--data", str(report_tree), "--out", str(out), "--format", "md", "--since", "1h",
                 "--every", "1h", "--runs", "2"]) == 0
    # the second run's window is the hour before the next full hour, whenever the process woke up
    assert re.search(r"Window: \d{4}-\d\d-\d\d \d\d:00:00 UTC to the last event", (out / "latest.md").read_text())


def test_text_from_the_data_is_escaped_in_markdown_as_in_html(tmp_path: Path, outcomes: Any) -> None:
    """Model names, engine ids and methods come from the engines: shown literally, never as
    markup (Markdown renderers pass HTML through, and would follow a link)."""
    model, instance, method = "<script>alert(1)</script>", "[x](javascript:alert(1))", "*draft*_`model`"
    tree = outcomes.write_table(tmp_path / "data", [
        outcomes.drafted(3, 2, model=model, engine_instance=instance, method=method, event_time=T)])
    out = tmp_path / "reports"
    assert main(["report", "--data", str(tree), "--out", str(out)]) == 0
    md, page = (out / "latest.md").read_text(), (out / "latest.html").read_text()
    assert "<script>" not in md and "<script>" not in page
    row = next(line for line in md.splitlines() if "alert" in line)
    cells = [cell.strip() for cell in row.strip("|").split(" | ")]
    assert cells[:3] == [r"\[x\](javascript:alert(1))/dp0", "&lt;script&gt;alert(1)&lt;/script&gt;",
                         r"\*draft\*\_\`model\`"]
    assert html.escape(model, quote=False) in page
