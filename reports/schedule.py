"""When scheduled reports run: ``--every 1h`` (a fixed interval, aligned to the Unix epoch, so
``1h`` runs on the hour) or a five-field cron expression (``"*/15 * * * *"``, UTC)."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^(\d+)\s*([smhd])$")
#: (name, lowest, highest) of the five cron fields.
_CRON_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12), ("day of week", 0, 6))


def parse_duration(text: str) -> timedelta:
    """``90s``, ``15m``, ``1h``, ``7d`` as a timedelta (a clear ``ValueError`` otherwise)."""
    match = _DURATION.match(text.strip())
    if not match or int(match.group(1)) == 0:
        raise ValueError(f"not a duration: {text!r} (expected a positive number and a unit s, m, h or d, e.g. 1h)")
    return timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])


class Schedule(ABC):
    """When to run next."""

    @abstractmethod
    def next_after(self, now: datetime) -> datetime:
        """The first run time strictly after ``now`` (UTC, aware)."""


@dataclass(frozen=True)
class Every(Schedule):
    """A fixed interval, aligned to the Unix epoch."""

    interval: timedelta

    def next_after(self, now: datetime) -> datetime:
        step = self.interval.total_seconds()
        return datetime.fromtimestamp((now.timestamp() // step + 1) * step, UTC)


@dataclass(frozen=True)
class Cron(Schedule):
    """A cron expression: minute hour day-of-month month day-of-week, with ``*``, lists,
    ranges and ``/step``; when both day fields are restricted, either may match (as in cron)."""

    fields: tuple[frozenset[int], ...]
    any_day_of_month: bool
    any_day_of_week: bool

    @classmethod
    def parse(cls, text: str) -> Cron:
        parts = text.split()
        if len(parts) != 5:
            raise ValueError(f"not a cron expression: {text!r} (expected 5 fields: minute hour day month weekday)")
        fields = tuple(_cron_field(part, *spec) for part, spec in zip(parts, _CRON_FIELDS, strict=True))
        return cls(fields, parts[2].startswith("*"), parts[4].startswith("*"))

    def next_after(self, now: datetime) -> datetime:
        t = now.astimezone(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
        limit = t + timedelta(days=366 * 5)
        while t < limit:
            if self._matches(t):
                return t
            t += timedelta(minutes=1) if t.month in self.fields[3] and self._day_matches(t) else \
                timedelta(days=1) - timedelta(hours=t.hour, minutes=t.minute)
        raise ValueError("the cron expression never matches")

    def _matches(self, t: datetime) -> bool:
        return t.minute in self.fields[0] and t.hour in self.fields[1] and t.month in self.fields[3] \
            and self._day_matches(t)

    def _day_matches(self, t: datetime) -> bool:
        dom, dow = t.day in self.fields[2], (t.weekday() + 1) % 7 in self.fields[4]
        if self.any_day_of_month or self.any_day_of_week:
            return dom and dow
        return dom or dow


def parse_schedule(text: str) -> Schedule:
    """``--every``: a duration (``1h``) or a cron expression (``"0 * * * *"``)."""
    return Cron.parse(text) if len(text.split()) > 1 else Every(parse_duration(text))


def _cron_field(text: str, name: str, low: int, high: int) -> frozenset[int]:
    values: set[int] = set()
    for item in text.split(","):
        spec, _, step_text = item.partition("/")
        try:
            step = int(step_text) if step_text else 1
            if spec == "*":
                start, end = low, high
            elif "-" in spec:
                start, end = (int(x) for x in spec.split("-", 1))
            else:
                start = end = int(spec)
                if step_text:
                    end = high
        except ValueError:
            raise ValueError(f"cron {name} field {text!r}: not a number, range, list or step") from None
        top = 7 if name == "day of week" else high  # 7 is Sunday too
        if not (low <= start <= end <= top) or step < 1:
            raise ValueError(f"cron {name} field {text!r}: values must lie in {low}-{high}")
        values.update(v % 7 if name == "day of week" else v for v in range(start, end + 1, step))
    return frozenset(values)
