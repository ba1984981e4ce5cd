"""Every command's exit codes, as docs/commands.md lists them ("Exit codes"): each one run for
real, and the table held to the commands the CLI has."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from devtools.ports import free_port
from specmetrics.cli import build_parser, main
from specmetrics.storage.damage import LOG_DIR
from specmetrics.storage.layout import DATA_GLOB
from specmetrics.transport.log import LocalLogWriter
from tests.support.ingest import ingest_once, ingest_tree_once
from tests.support.loadgen import write_load
from tests.support.metrics import wait_for

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "commands.md"
UNREACHABLE = "kafka://127.0.0.1:1/steps"


def documented() -> dict[str, set[int]]:
    """The exit codes of each command, from the table under "Exit codes"."""
    table = DOCS.read_text(encoding="utf-8").partition("## Exit codes")[2]
    return {name: {int(code) for code in re.findall(r"(?:^|; )(\d+) ", codes)}
            for name, codes in re.findall(r"^\| `([a-z-]+)` \| (.+) \|$", table, flags=re.MULTILINE)}


def commands() -> set[str]:
    parser = build_parser()
    return {name for action in parser._subparsers._group_actions  # type: ignore[union-attr]
            for name in getattr(action, "choices", {})}


def stored(tmp_path: Path, bad_record: bool = False) -> Path:
    """A small ingested table; with a record the ingester sets aside."""
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=2000)
    if bad_record:
        LocalLogWriter(log).append([b"\x00 not a step"])
    ingest_once(log, data)
    return data


def cli(*args: str) -> subprocess.Popen[bytes]:
    """The command in a child whose SIGINT has its default action, whatever the test run inherited: a
    shell's background job ignores SIGINT, and a child started so would never see KeyboardInterrupt. A
    handler in this process, unlike an ignored signal, is reset to the default in the child."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen([sys.executable, "-m", "specmetrics.cli", *args], cwd=ROOT,
                                env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
    finally:
        signal.signal(signal.SIGINT, previous)


def stopped(process: subprocess.Popen[bytes], ready: Callable[[], bool], sig: signal.Signals) -> int:
    try:
        wait_for(ready, timeout_s=60, what="the command to start")
        process.send_signal(sig)
        return process.wait(60)
    finally:
        if process.poll() is None:
            process.kill()


def not_clean(tmp_path: Path) -> int:
    data = stored(tmp_path)
    sorted(data.glob(DATA_GLOB))[0].unlink()  # a committed file gone: left out, its offsets a gap
    return main(["verify", "--data", str(data)])


def old_tree(tmp_path: Path) -> Path:
    """A small tree as an ingester wrote it before tables."""
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=2000)
    ingest_tree_once(log, data)
    return data


def damaged(tmp_path: Path) -> Path:
    """A small table with its last commit truncated."""
    log, data = tmp_path / "log", tmp_path / "data"
    write_load(log, rows=2000)
    ingest_once(log, data)
    last = sorted((data / LOG_DIR).glob("*.json"))[-1]
    last.write_bytes(last.read_bytes()[:50])
    return data


def report_interrupted(tmp_path: Path) -> int:
    data, out = stored(tmp_path), tmp_path / "reports"
    process = cli("report", "--data", str(data), "--out", str(out), "--every", "1h")
    return stopped(process, (out / "latest.md").exists, signal.SIGINT)


def served(tmp_path: Path, sig: signal.Signals) -> int:
    (tmp_path / "site").mkdir()
    port = free_port()
    process = cli("serve", "--dir", str(tmp_path / "site"), "--port", str(port))

    def listening() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            return False

    return stopped(process, listening, sig)


def demo_in_a_file(tmp_path: Path) -> int:
    (tmp_path / "x.txt").touch()
    return main(["demo", "--workdir", str(tmp_path / "x.txt")])


def heartbeat(tmp_path: Path) -> int:
    beat = tmp_path / "beat"
    beat.write_text(str(time.time()))
    return main(["health", "--heartbeat-file", str(beat)])


#: (command, exit code) -> how to get it, run in a fresh tmp_path.
CASES: dict[tuple[str, int], Callable[[Path], int]] = {
    ("demo", 2): demo_in_a_file,
    ("ingest", 0): lambda tmp: (write_load(tmp / "log", rows=500), main(
        ["ingest", "--source", (tmp / "log").as_uri(), "--out", str(tmp / "out"), "--once", "--quiet"]))[1],
    ("ingest", 2): lambda tmp: main(["ingest", "--source", "bogus://x", "--out", str(tmp / "out"), "--once"]),
    ("ingest", 4): lambda tmp: main(["ingest", "--source", (tmp / "log").as_uri(), "--out", str(damaged(tmp)),
                                     "--once", "--quiet"]),
    ("verify", 4): lambda tmp: main(["verify", "--data", str(damaged(tmp))]),
    ("rollup", 4): lambda tmp: main(["rollup", "--data", str(damaged(tmp))]),
    ("sql", 4): lambda tmp: main(["sql", "--data", str(damaged(tmp)), "SELECT count(*) FROM request_steps"]),
    ("db", 4): lambda tmp: main(["db", "export", str(tmp / "x.duckdb"), "--data", str(damaged(tmp))]),
    ("table", 4): lambda tmp: main(["table", "optimize", "--data", str(damaged(tmp))]),
    ("report", 4): lambda tmp: main(["report", "--data", str(damaged(tmp)), "--out", str(tmp / "r")]),
    ("verify", 0): lambda tmp: main(["verify", "--data", str(stored(tmp))]),
    ("verify", 1): not_clean,
    ("verify", 3): lambda tmp: main(["verify", "--data", str(stored(tmp, bad_record=True))]),
    ("verify", 2): lambda tmp: main(["verify", "--data", str(tmp / "nowhere")]),
    ("rollup", 0): lambda tmp: main(["rollup", "--data", str(stored(tmp))]),
    ("rollup", 2): lambda tmp: main(["rollup", "--data", str(tmp / "nowhere")]),
    ("sql", 0): lambda tmp: main(["sql", "--data", str(stored(tmp)), "SELECT count(*) FROM request_steps"]),
    ("sql", 2): lambda tmp: main(["sql", "--data", str(stored(tmp)), "SELECT nothing FROM request_steps"]),
    ("db", 0): lambda tmp: main(["db", "export", str(tmp / "x.duckdb"), "--data", str(stored(tmp))]),
    ("db", 2): lambda tmp: main(["db", "export", str(tmp / "x.duckdb"), "--data", str(tmp)]),
    ("table", 0): lambda tmp: main(["table", "convert", "--data", str(old_tree(tmp))]),
    ("table", 2): lambda tmp: main(["table", "checkpoint", "--data", str(old_tree(tmp))]),
    ("report", 0): lambda tmp: main(["report", "--data", str(stored(tmp)), "--out", str(tmp / "r")]),
    ("report", 1): lambda tmp: main(["report", "--data", str(stored(tmp)), "--out", str(tmp / "r"),
                                     "--since", "2001-01-01T00:00:00", "--until", "2001-01-02T00:00:00"]),
    ("report", 2): lambda tmp: main(["report", "--data", str(tmp / "nowhere"), "--out", str(tmp / "r")]),
    ("report", 130): report_interrupted,
    ("loadgen", 0): lambda tmp: main(["loadgen", "--sink", (tmp / "log").as_uri(), "--rows", "100"]),
    ("loadgen", 1): lambda tmp: main(["loadgen", "--sink", UNREACHABLE, "--rows", "100"]),
    ("loadgen", 2): lambda tmp: main(["loadgen", "--sink", "bogus://x", "--rows", "100"]),
    ("schema", 0): lambda tmp: main(["schema"]),
    ("create-topics", 2): lambda tmp: main(["create-topics", UNREACHABLE]),
    ("health", 0): heartbeat,
    ("health", 1): lambda tmp: main(["health", "--heartbeat-file", str(tmp / "none")]),
    ("serve", 0): lambda tmp: served(tmp, signal.SIGTERM),
    ("serve", 2): lambda tmp: main(["serve", "--dir", str(tmp / "nowhere")]),
    ("serve", 130): lambda tmp: served(tmp, signal.SIGINT),
}
#: Codes a whole test run elsewhere asserts: the test file and the assertion in it.
ELSEWHERE: dict[tuple[str, int], tuple[str, str]] = {
    ("demo", 0): ("tests/support/vllm.py", '"demo", "--workdir"'),  # DemoRun: the demo on real vLLM
    ("create-topics", 0): ("tests/specmetrics/commands/test_create_topics.py",
                           'assert main(["create-topics", kafka_url]) == 0'),
}


def test_the_table_lists_every_command_and_each_code_is_run() -> None:
    listed = documented()
    assert set(listed) == commands()
    assert {(name, code) for name, codes in listed.items() for code in codes} == set(CASES) | set(ELSEWHERE)
    for path, assertion in ELSEWHERE.values():
        assert assertion in (ROOT / path).read_text(encoding="utf-8"), path


@pytest.mark.parametrize("case", sorted(CASES), ids=[f"{name}-{code}" for name, code in sorted(CASES)])
def test_the_exit_code(case: tuple[str, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SPECMETRICS_KAFKA_REQUEST_TIMEOUT_S", "1")
    monkeypatch.setenv("SPECMETRICS_KAFKA_SPOOL_DIR", str(tmp_path / "spool"))
    assert CASES[case](tmp_path) == case[1]
    if case[1] == 2:
        assert f"specmetrics {case[0]}: error: " in capsys.readouterr().err
    if case[1] == 4:
        [line] = capsys.readouterr().err.splitlines()
        assert line.startswith(f"specmetrics {case[0]}: error: ") and "the table's log is damaged: _delta_log/" in line


@pytest.mark.parametrize("name", sorted(commands()))
def test_a_wrong_option_is_a_usage_error(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped_by:
        main([name, "--no-such-option"])
    assert stopped_by.value.code == 2
    assert "usage: specmetrics" in capsys.readouterr().err
