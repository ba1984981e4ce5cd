"""--every: intervals aligned to the epoch, cron expressions, clear errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from specmetrics.reports import parse_duration, parse_schedule
from specmetrics.reports.schedule import Cron

NOW = datetime(2026, 12, 3, 8, 7, 30, tzinfo=UTC)  # a Thursday


@pytest.mark.parametrize(("every", "expected"), [
    ("1h", datetime(2026, 12, 3, 9, 0, tzinfo=UTC)),
    ("15m", datetime(2026, 12, 3, 8, 15, tzinfo=UTC)),
    ("30s", datetime(2026, 12, 3, 8, 8, tzinfo=UTC)),
    ("1d", datetime(2026, 12, 4, tzinfo=UTC)),
    ("*/15 * * * *", datetime(2026, 12, 3, 8, 15, tzinfo=UTC)),
    ("0 * * * *", datetime(2026, 12, 3, 9, 0, tzinfo=UTC)),
    ("0 6 * * 1", datetime(2026, 12, 7, 6, 0, tzinfo=UTC)),  # next Monday
    ("0 6 * * 7", datetime(2026, 12, 6, 6, 0, tzinfo=UTC)),  # 7 is Sunday too
    ("30 2 1 * *", datetime(2027, 1, 1, 2, 30, tzinfo=UTC)),
    ("0 0 1 1-3 *", datetime(2027, 1, 1, tzinfo=UTC)),
    ("5,10 8 * * *", datetime(2026, 12, 3, 8, 10, tzinfo=UTC)),
    ("0 0 13 * 5", datetime(2026, 12, 4, tzinfo=UTC)),  # day 13 OR a Friday, as in cron
    ("0 0 */2 * 1", datetime(2026, 12, 7, tzinfo=UTC)),  # an odd day AND a Monday: '*/2' is a '*' field
    ("5/10 * * * *", datetime(2026, 12, 3, 8, 15, tzinfo=UTC)),
    ("10-30/5 * * * *", datetime(2026, 12, 3, 8, 10, tzinfo=UTC)),
])
def test_next_run(every: str, expected: datetime) -> None:
    assert parse_schedule(every).next_after(NOW) == expected


def test_a_run_time_is_never_repeated() -> None:
    schedule = parse_schedule("1h")
    first = schedule.next_after(NOW)
    assert schedule.next_after(first) == first + timedelta(hours=1)


@pytest.mark.parametrize(("every", "message"), [
    ("0h", "not a duration"), ("1 hour", "not a cron expression"), ("1w", "not a duration"),
    ("61 * * * *", "minute field '61'"), ("* 24 * * *", "hour field"), ("x * * * *", "not a number"),
    ("0 0 30 2 *", "never matches"),
])
def test_bad_schedules_are_clear_errors(every: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_schedule(every).next_after(NOW)


def test_sunday_is_0_and_7_in_ranges_with_steps() -> None:
    assert Cron.parse("0 0 * * 2-7/2").fields[4] == {2, 4, 6}
    assert Cron.parse("0 0 * * 5-7").fields[4] == {5, 6, 0}


def test_durations() -> None:
    assert parse_duration("90s") == timedelta(seconds=90)
    assert parse_duration(" 7d") == timedelta(days=7)
