"""Group churn: how long after a member change every partition is read again, under rolling
restarts of the ingesters of one Kafka consumer group (Tansu on loopback), per group setting.

For each setting: a topic of ``--partitions`` partitions fed by a realtime load generator, and
``--members`` ingesters of one group. Every ``--interval`` seconds one ingester is stopped
(SIGTERM: it flushes, commits and leaves) and a new one started in its place, ``--changes``
times. A change has settled when every live ingester has logged an assignment made after the
change and together they cover every partition; its settle time runs from the SIGTERM. A change
that has not settled when the next one comes counts as unsettled (its time is then at least the
interval). The settings:

* ``default``: session timeout 10 s, heartbeat 3 s (the project's defaults);
* ``short``: session timeout 3 s, heartbeat 0.5 s;
* ``static``: the default timeouts with static membership (``SPECMETRICS_KAFKA_GROUP_INSTANCE_ID``,
  one id per slot, reused by the ingester that replaces it).

Prints one JSON line per setting.

    python -m benchmarks.bench_churn [--partitions 6] [--members 3] [--changes 5] [--interval 20]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from benchmarks.args import positive_int
from devtools.kafka_broker import TansuBroker

ROOT = Path(__file__).resolve().parents[1]
SETTINGS: dict[str, dict[str, str]] = {
    "default": {},
    "short": {"SPECMETRICS_KAFKA_SESSION_TIMEOUT_MS": "3000", "SPECMETRICS_KAFKA_HEARTBEAT_INTERVAL_MS": "500"},
    "static": {},  # plus a group instance id per slot
}
_ASSIGNED = re.compile(r"^(\S+ \S+) INFO specmetrics\.ingest\.sources\.kafka: assigned partitions \[([\d, ]*)\]",
                       re.MULTILINE)


def assignments(log: Path) -> list[tuple[float, set[int]]]:
    """``(time, partitions)`` of each assignment an ingester logged (its log's local clock: UTC here)."""
    found = []
    for stamp, partitions in _ASSIGNED.findall(log.read_text(errors="replace")):
        when = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
        found.append((when, {int(p) for p in partitions.split(",") if p.strip()}))
    return found


def settled_at(logs: list[Path], after: float, partitions: int) -> float | None:
    """When the live ingesters' latest assignments, each made after ``after``, covered every partition."""
    latest = [assignments(log) for log in logs]
    if not all(found and found[-1][0] > after for found in latest):
        return None
    covered = set().union(*(found[-1][1] for found in latest))
    return max(found[-1][0] for found in latest) if covered >= set(range(partitions)) else None


def ingester(url: str, out: Path, log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as stderr:
        return subprocess.Popen([sys.executable, "-m", "specmetrics.cli", "-v", "ingest", "--source", url, "--out",
                                 str(out), "--quiet"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr, env=env)


def run_setting(name: str, args: argparse.Namespace, workdir: Path) -> dict[str, object]:
    base = {**os.environ, "PYTHONPATH": str(ROOT), "SPECMETRICS_INGEST_FLUSH_IDLE_S": "1",
            "SPECMETRICS_KAFKA_TOPIC_PARTITIONS": str(args.partitions), **SETTINGS[name]}
    root = workdir / name
    root.mkdir()
    with TansuBroker() as broker:
        url = broker.url("churn")
        subprocess.run([sys.executable, "-m", "specmetrics.cli", "create-topics", url], cwd=ROOT, env=base,
                       check=True, capture_output=True)
        load = subprocess.Popen([sys.executable, "-m", "specmetrics.cli", "loadgen", "--sink", url, "--rows",
                                 "100000000", "--engines", str(2 * args.partitions), "--realtime", "--step-ms", "50"],
                                cwd=ROOT, env=base, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        members: list[tuple[subprocess.Popen[bytes], Path]] = []

        def start(slot: int, generation: int) -> tuple[subprocess.Popen[bytes], Path]:
            env = dict(base)
            if name == "static":
                env["SPECMETRICS_KAFKA_GROUP_INSTANCE_ID"] = f"ingest-{slot}"
            log = root / f"ingest-{slot}-{generation}.log"
            return ingester(url, root / "out", log, env), log

        settle: list[float] = []
        unsettled = 0
        try:
            members = [start(slot, 0) for slot in range(args.members)]
            deadline = time.time() + 60
            while settled_at([log for _, log in members], 0, args.partitions) is None and time.time() < deadline:
                time.sleep(0.2)
            if settled_at([log for _, log in members], 0, args.partitions) is None:
                tail = members[0][1].read_text(errors="replace")[-2000:]
                raise RuntimeError(f"the {args.members} ingesters did not log assignments covering every partition "
                                   f"within 60 s of their start; the first one's log ends:\n{tail}")
            for change in range(args.changes):
                slot = change % args.members
                process, _ = members[slot]
                changed = time.time()
                process.send_signal(signal.SIGTERM)
                process.wait(60)
                members[slot] = start(slot, change + 1)
                end = changed + args.interval
                done = None
                while done is None and time.time() < end:
                    done = settled_at([log for _, log in members], changed, args.partitions)
                    time.sleep(0.2)
                if done is None:
                    unsettled += 1
                else:
                    settle.append(done - changed)
                time.sleep(max(0.0, end - time.time()))
        finally:
            for process, _ in members:
                process.send_signal(signal.SIGTERM)
            for process, _ in members:
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()
            load.kill()
            load.wait()
    return {"bench": "group_churn", "setting": name, "partitions": args.partitions, "members": args.members,
            "changes": args.changes, "interval_s": args.interval, "settled": len(settle), "unsettled": unsettled,
            "settle_median_s": round(statistics.median(settle), 2) if settle else None,
            "settle_max_s": round(max(settle), 2) if settle else None}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=positive_int, default=6)
    parser.add_argument("--members", type=positive_int, default=3)
    parser.add_argument("--changes", type=positive_int, default=5)
    parser.add_argument("--interval", type=positive_int, default=20)
    parser.add_argument("--settings", default=",".join(SETTINGS), help="Comma-separated: " + ", ".join(SETTINGS))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-churn-") as workdir:
        for name in args.settings.split(","):
            print(json.dumps(run_setting(name, args, Path(workdir))), flush=True)


if __name__ == "__main__":
    main()
