"""Commands that repeat on a schedule (``--every``): ``report`` and ``table maintain``."""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from specmetrics.heartbeat import Heartbeat
from specmetrics.reports import parse_schedule


def add_schedule_arguments(parser: argparse.ArgumentParser, beats_when: str) -> None:
    """``--every``, ``--runs`` and ``--heartbeat-file`` (rewritten after each run that ``beats_when``
    says)."""
    parser.add_argument("--every", default=None,
                        help="Run now, then on a schedule: an interval (1h, 15m) or a cron expression in quotes "
                             "('0 * * * *', UTC). A failed run is logged and the next one still runs.")
    parser.add_argument("--runs", type=int, default=None,
                        help="With --every: stop after this many runs; the exit code is 1 if the last one failed.")
    parser.add_argument("--heartbeat-file", type=Path, default=None,
                        help=f"Rewritten after each run that {beats_when}, so that 'specmetrics health' tells "
                             "whether one succeeded lately (the container's healthcheck).")


def run_as_scheduled(args: argparse.Namespace, job: Callable[[datetime], int], log: logging.Logger, what: str) -> int:
    """Run ``job(now)`` once, or with ``--every`` on the schedule (:func:`run_on_schedule`); the
    heartbeat file (``--heartbeat-file``) is rewritten after each run that returned 0. Run once,
    the job's errors and exit code are the command's."""
    if args.runs is not None and args.runs < 1:
        raise ValueError("--runs must be at least 1")
    heartbeat = Heartbeat(args.heartbeat_file, interval_s=0) if args.heartbeat_file else None
    if args.every:
        return run_on_schedule(args.every, args.runs, job, heartbeat, log, what)
    code = job(datetime.now(UTC))
    if code == 0 and heartbeat:
        heartbeat.beat()
    return code


def run_on_schedule(every: str, runs: int | None, job: Callable[[datetime], int], heartbeat: Heartbeat | None,
                    log: logging.Logger, what: str) -> int:
    """Run ``job(when)`` now, then at each time of the schedule ``every``, ``runs`` times (None: for
    ever); ``when`` is the time the run was due. A run failed when it raised or returned other than 0:
    logged, and the next one still runs; ``heartbeat`` is rewritten after each run that succeeded. The
    exit code: 1 if the last run failed."""
    schedule = parse_schedule(every)
    schedule.next_after(datetime.now(UTC))  # a cron expression that never matches fails now, not after a run
    done, when, failed = 0, datetime.now(UTC), False
    while runs is None or done < runs:
        if done:
            when = schedule.next_after(datetime.now(UTC))
            _sleep_until(when)
        try:
            code = job(when)
            failed = code != 0
            if failed:
                log.error("%s run failed (the next one still runs): exit code %d", what, code)
            elif heartbeat:
                heartbeat.beat({"runs": done + 1})
        except Exception as exc:
            failed = True
            log.error("%s run failed (the next one still runs): %s: %s", what, type(exc).__name__, exc)
        done += 1
    return 1 if failed else 0


def _sleep_until(when: datetime) -> None:
    while (left := (when - datetime.now(UTC)).total_seconds()) > 0:
        time.sleep(min(left, 60.0))
