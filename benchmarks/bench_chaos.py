"""A storm of faults on a Kafka consumer group, then quiet: how long until every row is stored once.

Realtime load generators (several engines each) produce into one topic on a Tansu broker while
ingesters of one consumer group, writing one Delta table, are SIGKILLed and restarted, SIGSTOPped
and continued, SIGTERMed and restarted, scaled up and down, and the broker is paused. Then the
faults stop, the load ends, the ingesters still up keep running, and the table is counted until
every engine's rows equal the load generator's truth (or the deadline passes). Prints one JSON
line: the faults and their timeline, the rows stored per engine against the truth, duplicates, and
``catch_up_s``, the seconds from the end of the load to the last row stored. The ingesters give up
a stalled membership after 20 s (``SPECMETRICS_INGEST_MAX_STALLED_S``, unless set) and send no
LeaveGroup when they stop (``SPECMETRICS_KAFKA_LEAVE_GROUP_ON_CLOSE=false``, unless set: Tansu's group
never forms again after the leader of a forming group leaves it). ``--plain``: the
members are plain kafka-python consumers instead, to tell the broker's part from the ingester's.

    python -m benchmarks.bench_chaos [--seed 1] [--storm-s 360] [--engines 12] [--deadline-s 240]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.args import positive_int
from devtools.kafka_broker import TansuBroker

#: Requests per step and event-time spacing of the load (a busy engine, as in production).
BATCH_SIZE = 16
STEP_MS = 50.0
#: Load generators (processes); the engines are spread over them.
PRODUCERS = 3
ROOT = Path(__file__).resolve().parents[1]
#: The command line, beside this Python.
SPECMETRICS = str(Path(sys.executable).parent / "specmetrics")


@dataclass
class Storm:
    """What happened, for the record: the faults by kind and the processes' exit codes."""

    faults: dict[str, int] = field(default_factory=dict)
    exits: list[int] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    timeline: list[tuple[float, str]] = field(default_factory=list)  # (seconds since the start, fault)

    def count(self, kind: str) -> None:
        self.faults[kind] = self.faults.get(kind, 0) + 1
        self.timeline.append((round(time.monotonic() - self.started, 1), kind))


class Group:
    """The ingesters of one consumer group, started as the CLI, each with its own log file (``plain``:
    plain kafka-python consumers instead, :func:`plain_member`, none of the ingester's code)."""

    def __init__(self, url: str, out: Path, work: Path, env: dict[str, str], plain: bool = False) -> None:
        self.url, self.out, self.work, self.env, self.plain = url, out, work, env, plain
        self.members: list[subprocess.Popen[bytes]] = []
        self.stopped: set[int] = set()  # pids under SIGSTOP
        self._started = 0

    def start(self) -> subprocess.Popen[bytes]:
        self._started += 1
        log = open(self.work / f"ingester-{self._started}.log", "wb")  # noqa: SIM115 (the process owns it)
        command = [sys.executable, "-m", "benchmarks.bench_chaos", "--plain-member", self.url] if self.plain else \
            [SPECMETRICS, "-v", "ingest", "--source", self.url, "--out", str(self.out), "--quiet",
             "--heartbeat-file", str(self.work / f"heartbeat-{self._started}")]
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=ROOT)
        self.members.append(process)
        return process

    def alive(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.members if p.poll() is None]

    def cont(self, process: subprocess.Popen[bytes]) -> None:
        if process.pid in self.stopped:
            process.send_signal(signal.SIGCONT)
            self.stopped.discard(process.pid)

    def stop_all(self, storm: Storm) -> None:
        for process in self.alive():
            self.cont(process)
            process.send_signal(signal.SIGTERM)
        for process in self.members:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            storm.exits.append(process.returncode)


def stored(out: Path) -> tuple[dict[str, int], int]:
    """Rows per engine in the table, and how many rows share an (event id, request id) with another."""
    import duckdb
    from deltalake import DeltaTable

    if not (out / "_delta_log").is_dir():
        return {}, 0
    files = DeltaTable(str(out)).file_uris()
    if not files:
        return {}, 0
    con = duckdb.connect()
    rows = con.execute("SELECT engine_id, count(*) FROM read_parquet(?) GROUP BY engine_id", [files]).fetchall()
    duplicates = con.execute("SELECT count(*) - count(DISTINCT (event_id, request_id)) FROM read_parquet(?)",
                             [files]).fetchall()[0][0]
    return {str(engine): int(n) for engine, n in rows}, int(duplicates)


def plain_member(url: str) -> None:
    """A member of the group that only reads: subscribes, polls, prints each assignment it is handed,
    and leaves the group on SIGTERM (as the ingester does)."""
    from kafka import KafkaConsumer

    from specmetrics.transport.kafka import KafkaAddress, KafkaSettings

    address, settings = KafkaAddress.parse(url), KafkaSettings()
    consumer = KafkaConsumer(address.topic, bootstrap_servers=list(address.bootstrap_servers),
                             group_id=os.environ["SPECMETRICS_INGEST_GROUP"], enable_auto_commit=False,
                             session_timeout_ms=settings.session_timeout_ms,
                             heartbeat_interval_ms=settings.heartbeat_interval_ms, auto_offset_reset="earliest")
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
    last: list[int] | None = None
    while not stopping:
        consumer.poll(timeout_ms=500)
        assigned = sorted(tp.partition for tp in consumer.assignment())
        if assigned != last:
            print(f"{time.time():.1f} assigned {assigned}", flush=True)
            last = assigned
    consumer.close(autocommit=False)


def plain_member_join_s(bootstrap: str, topic: str, group: str, timeout_s: float = 30.0) -> float | None:
    """Seconds until a plain kafka-python consumer joining ``group`` is handed partitions (None: not
    within ``timeout_s``, the broker holds its join too)."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=[bootstrap], group_id=group, enable_auto_commit=False,
                             session_timeout_ms=6000, heartbeat_interval_ms=2000)
    started = time.monotonic()
    try:
        while time.monotonic() - started < timeout_s:
            consumer.poll(timeout_ms=500)
            if consumer.assignment():
                return round(time.monotonic() - started, 1)
        return None
    finally:
        consumer.close(autocommit=False)


def run_storm(seed: int, storm_s: float, engines: int, deadline_s: float, work: Path,
              partitions: int = 4, max_ingesters: int = 4, broker_pause: bool = True,
              plain: bool = False) -> dict[str, Any]:
    """One storm on a fresh broker; returns the record (see the module's docstring)."""
    rng = random.Random(seed)
    out = work / "table"
    env = {**os.environ,
           "SPECMETRICS_KAFKA_SPOOL_DIR": str(work / "spool"),
           "SPECMETRICS_KAFKA_TOPIC_PARTITIONS": str(partitions),
           "SPECMETRICS_KAFKA_SESSION_TIMEOUT_MS": "6000",
           "SPECMETRICS_KAFKA_HEARTBEAT_INTERVAL_MS": "2000",
           "SPECMETRICS_INGEST_GROUP": f"chaos-{seed}",
           "SPECMETRICS_INGEST_FLUSH_EVENT_TIME_S": "5",
           "SPECMETRICS_INGEST_FLUSH_IDLE_S": "1",
           "SPECMETRICS_INGEST_LOG_INTERVAL_S": "5",
           "SPECMETRICS_INGEST_MAX_STALLED_S": os.environ.get("SPECMETRICS_INGEST_MAX_STALLED_S", "20"),
           "SPECMETRICS_KAFKA_LEAVE_GROUP_ON_CLOSE": os.environ.get("SPECMETRICS_KAFKA_LEAVE_GROUP_ON_CLOSE", "false")}
    storm = Storm()
    with TansuBroker() as broker:
        url = broker.url("chaos.steps")
        subprocess.run([SPECMETRICS, "create-topics", url], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        steps = int(storm_s * 1000 / STEP_MS)
        producers = []
        for index in range(PRODUCERS):
            share = engines // PRODUCERS + (index < engines % PRODUCERS)
            if not share:
                continue
            producers.append(subprocess.Popen(
                [SPECMETRICS, "loadgen", "--sink", url, "--realtime",
                 "--engines", str(share), "--batch-size", str(BATCH_SIZE), "--step-ms", str(STEP_MS),
                 "--rows", str(steps * share * BATCH_SIZE), "--seed", str(seed * 100 + index),
                 "--engine-prefix", f"engine{index}", "--truth", str(work / f"truth-{index}.json")],
                stdout=subprocess.DEVNULL, stderr=open(work / f"loadgen-{index}.log", "wb"), env=env))  # noqa: SIM115
        group = Group(url, out, work, env, plain)
        for _ in range(2):
            group.start()
        paused_broker = not broker_pause
        while any(p.poll() is None for p in producers):
            time.sleep(rng.uniform(1.0, 4.0))
            if not any(p.poll() is None for p in producers):
                break
            _fault(rng, group, broker, storm, max_ingesters, allow_broker_pause=not paused_broker)
            paused_broker = paused_broker or storm.faults.get("broker_pause", 0) > 0
        load_end = time.monotonic()
        # Quiet: stopped members continue, at least one member runs.
        for process in group.alive():
            group.cont(process)
        if not group.alive():
            group.start()
        producer_exits = [p.wait() for p in producers]
        truth: dict[str, int] = {}
        for index in range(len(producers)):
            for engine, counters in json.loads((work / f"truth-{index}.json").read_text()).items():
                truth[engine] = sum(counters["request_steps"].values())
        caught_up_at = None
        rows: dict[str, int] = {}
        duplicates = 0
        while not plain and time.monotonic() - load_end < deadline_s:
            rows, duplicates = stored(out)
            if rows == truth:
                caught_up_at = time.monotonic()
                break
            time.sleep(2.0)
        members_at_end = len(group.alive())
        # Stalled: is it the broker? A plain kafka-python member of the group, none of the ingester's code.
        if plain:
            time.sleep(10)  # the members of the last fault settle
        plain_join_s = None if caught_up_at is not None else plain_member_join_s(broker.bootstrap, "chaos.steps",
                                                                                   env["SPECMETRICS_INGEST_GROUP"])
        group.stop_all(storm)
        rows, duplicates = stored(out)
    return {
        "seed": seed, "storm_s": storm_s, "engines": engines, "partitions": partitions,
        "faults": dict(sorted(storm.faults.items())), "timeline": storm.timeline,
        "load_end_s": round(load_end - storm.started, 1), "members_at_end": members_at_end,
        "producer_exits": producer_exits, "ingester_exits": storm.exits,
        "truth_rows": sum(truth.values()), "stored_rows": sum(rows.values()), "duplicate_rows": duplicates,
        "engines_short": {e: truth[e] - rows.get(e, 0) for e in sorted(truth) if rows.get(e, 0) != truth[e]},
        "caught_up": caught_up_at is not None, "plain_member_join_s": plain_join_s,
        "catch_up_s": round(caught_up_at - load_end, 1) if caught_up_at is not None else None,
    }


def _fault(rng: random.Random, group: Group, broker: TansuBroker, storm: Storm, max_ingesters: int,
           allow_broker_pause: bool) -> None:
    """One random fault; continues a stopped member first when its pause is over."""
    alive = group.alive()
    running = [p for p in alive if p.pid not in group.stopped]
    kinds = ["sigkill", "sigstop", "sigterm", "scale_up", "scale_down"]
    kinds += ["broker_pause"] if allow_broker_pause else []
    kind = rng.choice(kinds)
    if kind == "scale_up" or not running:
        if len(alive) < max_ingesters:
            group.start()
            storm.count("scale_up")
        return
    victim = rng.choice(running)
    if kind == "sigkill":
        victim.kill()
        victim.wait()
        group.start()
    elif kind == "sigstop":
        victim.send_signal(signal.SIGSTOP)
        group.stopped.add(victim.pid)
        time.sleep(rng.uniform(5, 30) if len(running) > 1 else rng.uniform(5, 10))
        group.cont(victim)
    elif kind == "sigterm":
        victim.send_signal(signal.SIGTERM)
        victim.wait(timeout=60)
        group.start()
    elif kind == "scale_down":
        if len(running) < 2:
            return
        victim.send_signal(signal.SIGTERM)
        victim.wait(timeout=60)
    elif kind == "broker_pause":
        broker.pause()
        time.sleep(rng.uniform(5, 15))
        broker.resume()
    storm.count(kind)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--storm-s", type=positive_int, default=360, help="Seconds of load and faults.")
    parser.add_argument("--engines", type=positive_int, default=12)
    parser.add_argument("--deadline-s", type=positive_int, default=240,
                        help="Longest wait for the rows after the load ends.")
    parser.add_argument("--no-broker-pause", action="store_true", help="Leave the broker alone.")
    parser.add_argument("--plain", action="store_true", help="Members are plain kafka-python consumers, not "
                        "ingesters: whether the group stalls without the ingester's code (plain_member_join_s).")
    parser.add_argument("--plain-member", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--keep", type=Path, default=None, help="Keep the table and the processes' logs here.")
    args = parser.parse_args(argv)
    if args.plain_member:
        plain_member(args.plain_member)
        return
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        result = run_storm(args.seed, args.storm_s, args.engines, args.deadline_s, args.keep,
                           broker_pause=not args.no_broker_pause, plain=args.plain)
    else:
        with tempfile.TemporaryDirectory(prefix="specmetrics-chaos-") as work:
            result = run_storm(args.seed, args.storm_s, args.engines, args.deadline_s, Path(work),
                               broker_pause=not args.no_broker_pause, plain=args.plain)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
