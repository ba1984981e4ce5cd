"""A damaged table: every command names the damaged file and the problem in one line and exits 4
(no traceback, no Rust stack frame); `verify` decodes every page of every data file."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from specmetrics.cli import main
from specmetrics.storage.damage import LOG_DIR, StoreDamaged
from specmetrics.storage.layout import FileName
from specmetrics.storage.location import S3Location
from specmetrics.storage.parquet import FileStats
from specmetrics.storage.table import DataFile, Table
from tests.support.ingest import copy_under_another_attempt, ingest_once, ingest_to_s3
from tests.support.loadgen import write_load

COMMANDS = ("sql", "verify", "report", "ingest", "table optimize", "table checkpoint")


@pytest.fixture(scope="module")
def clean_table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A log of 100 steps and the table of it, in 4 flushes (versions 0-5: creation, claim, 4 commits)."""
    root = tmp_path_factory.mktemp("damage")
    write_load(root / "log", rows=6_400, seed=2)
    ingest_once(root / "log", root / "data", flush_rows=1_600)
    return root / "log", root / "data"


def commit(data: Path, version: int) -> Path:
    return data / LOG_DIR / f"{version:020d}.json"


def truncate_commit(data: Path) -> str:
    commit(data, 3).write_bytes(commit(data, 3).read_bytes()[:100])
    return f"{LOG_DIR}/{3:020d}.json: line 1 is not JSON (a truncated or overwritten commit)"


def delete_commit(data: Path) -> str:
    commit(data, 3).unlink()
    return f"{LOG_DIR}/{3:020d}.json: missing (commits up to 5 are there); the table's history has a hole"


def garbage_commit(data: Path) -> str:
    commit(data, 6).write_bytes(os.urandom(300).replace(b"\n", b" "))
    return f"{LOG_DIR}/{6:020d}.json: line 1 is not JSON"


def delete_checkpoint(data: Path) -> str:
    assert main(["table", "checkpoint", "--data", str(data)]) == 0
    (data / LOG_DIR / f"{5:020d}.checkpoint.parquet").unlink()
    return f"{LOG_DIR}/{5:020d}.checkpoint.parquet: the table's last checkpoint, but missing"


def break_footer(data: Path) -> str:
    file = Table(data).files()[1]
    content = bytearray(file.path.read_bytes())
    footer = len(content) - 8 - int.from_bytes(content[-8:-4], "little")
    content[footer + 10:footer + 30] = bytes(byte ^ 0x5A for byte in content[footer + 10:footer + 30])
    file.path.write_bytes(bytes(content))
    return f"{file.location}: its footer does not decode"


@pytest.mark.parametrize("damage", [truncate_commit, delete_commit, garbage_commit, delete_checkpoint, break_footer])
def test_every_command_names_the_damaged_file_in_one_line(
        damage: Callable[[Path], str], clean_table: tuple[Path, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    log, clean = clean_table
    data = tmp_path / "data"
    shutil.copytree(clean, data)
    expected = damage(data)
    capsys.readouterr()
    for command in COMMANDS:
        args = {"sql": ["sql", "--data", str(data), "SELECT count(*) FROM request_steps"],
                "verify": ["verify", "--data", str(data)],
                "report": ["report", "--data", str(data), "--out", str(tmp_path / "report")],
                "ingest": ["ingest", "--source", log.as_uri(), "--out", str(data), "--once", "--quiet"]
                }.get(command, [*command.split(), "--data", str(data)])
        code = main(args)
        out, err = capsys.readouterr()
        if command == "table checkpoint" and damage is break_footer:
            assert code == 0  # it reads the log only
            continue
        assert code == StoreDamaged.exit_code == 4, (command, out, err)
        if command == "verify" and damage is break_footer:  # the report, with the damaged file in it
            assert f"damaged: {Table(data).files()[1].relative}: its footer does not decode" in out
            continue
        [line] = err.splitlines()
        assert line.startswith(f"specmetrics {command.split()[0]}: error: ") and expected in line, (command, err)
        if damage is not break_footer:
            assert f"{data}: the table's log is damaged: " in line


def test_verify_finds_a_page_whose_checksum_does_not_match(
        clean_table: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One bit of a page's values flipped: readers sum other numbers, and nothing said so."""
    data = tmp_path / "data"
    shutil.copytree(clean_table[1], data)
    query = ["sql", "--data", str(data), "SELECT sum(accepted) AS accepted FROM request_steps"]
    assert main(query) == 0
    before = capsys.readouterr().out
    file = Table(data).files()[1]
    metadata = pq.read_metadata(file.path).row_group(0)
    chunks = [metadata.column(i) for i in range(metadata.num_columns)]
    [column] = [chunk for chunk in chunks if chunk.path_in_schema == "accepted"]
    content = bytearray(file.path.read_bytes())
    content[(column.dictionary_page_offset or column.data_page_offset) + column.total_compressed_size - 3] ^= 0x01
    file.path.write_bytes(bytes(content))
    assert main(query) == 0
    assert capsys.readouterr().out != before  # what the page checksum is for
    assert main(["verify", "--data", str(data)]) == 4
    out = capsys.readouterr().out
    assert f"damaged: {file.relative}: a page of row group 0 does not decode (could not verify page integrity, CRC " \
           "checksum verification failed" in out
    name = FileName.parse(file.path.name)
    assert name is not None and f"gap: log partition 0 offsets {name.start}-{name.end} are missing" in out  # not read


def test_verify_finds_a_file_whose_commit_records_other_rows(
        clean_table: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A commit's statistics that do not match its file (another writer's, or a file swapped for one of
    the same size): the count readers of the log take without opening the file is wrong."""
    data = tmp_path / "data"
    shutil.copytree(clean_table[1], data)
    table = Table(data)
    file = table.files()[1]
    assert file.rows
    copy = copy_under_another_attempt(file.path)
    table.replace([file], [DataFile(copy.relative_to(data).as_posix(), file.size, FileStats(file.rows + 64))])
    assert main(["verify", "--data", str(data)]) == 4
    assert f"damaged: {copy.relative_to(data)}: named by the table's log with {file.rows + 64:,} rows, but holds " \
           f"{file.rows:,}" in capsys.readouterr().out


def test_verify_finds_a_file_whose_commit_records_other_event_times(
        clean_table: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Statistics that place a file's rows an hour later than they are (another writer's): a report of
    the rows' own window skips the file. Readers trust the log; verify checks it against the footer."""
    data = tmp_path / "data"
    shutil.copytree(clean_table[1], data)
    table = Table(data)
    file = table.files()[1]
    copy = copy_under_another_attempt(file.path)
    stats = FileStats.read(copy)
    later = FileStats(stats.rows, (stats.low[0] + timedelta(hours=1), *stats.low[1:]),  # type: ignore[operator]
                      (stats.high[0] + timedelta(hours=1), *stats.high[1:]))  # type: ignore[operator]
    table.replace([file], [DataFile(copy.relative_to(data).as_posix(), file.size, later)])
    # a reader of the rows' own window skips the file
    assert copy.relative_to(data).as_posix() not in [f.relative for f in table.files(stats.low[0], stats.high[0])]
    assert main(["verify", "--data", str(data)]) == 4
    out = capsys.readouterr().out
    assert f"damaged: {copy.relative_to(data)}: its rows' event times ({stats.low[0]} to {stats.high[0]}) lie " \
           "outside those its commit recorded" in out and "readers of a time window would skip rows of it" in out


def test_damage_on_s3_is_named_in_one_line(s3_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location = S3Location.parse(s3_url)
    for command in ("sql", "verify", "report", "rollup"):  # "Generic delta kernel error: No files in log segment"
        elsewhere = f"{s3_url}/elsewhere"
        extra = {"sql": ["SELECT 1"], "report": ["--out", str(tmp_path)]}.get(command, [])
        assert main([command, "--data", elsewhere, *extra]) == 2
        assert capsys.readouterr().err == f"specmetrics {command}: error: {elsewhere} holds no table: point at the " \
                                          f"output of 'specmetrics ingest --out {elsewhere}'\n"
    write_load(tmp_path / "log", rows=6_400, seed=2)
    ingest_to_s3(tmp_path / "log", s3_url, tmp_path / "state", flush_rows=1_600)
    filesystem = location.filesystem()
    file = Table(location).files()[1]
    with filesystem.open_input_stream(location.key(file.relative)) as stream:
        content = bytearray(stream.read())
    content[-40:-20] = bytes(byte ^ 0x5A for byte in content[-40:-20])
    with filesystem.open_output_stream(location.key(file.relative)) as stream:
        stream.write(bytes(content))
    assert main(["verify", "--data", s3_url]) == 4
    assert f"damaged: {file.relative}: its footer does not decode" in capsys.readouterr().out
    assert main(["sql", "--data", s3_url, "SELECT count(*) FROM request_steps"]) == 4
    [line] = capsys.readouterr().err.splitlines()
    assert f"{file.location}: its footer does not decode" in line
    with filesystem.open_output_stream(location.key(f"{LOG_DIR}/{3:020d}.json")) as stream:
        stream.write(b'{"add": {"path": ')
    assert main(["sql", "--data", s3_url, "SELECT count(*) FROM request_steps"]) == 4
    [line] = capsys.readouterr().err.splitlines()
    assert line == f"specmetrics sql: error: {s3_url}: the table's log is damaged: {LOG_DIR}/{3:020d}.json: line 1 " \
                   "is not JSON (a truncated or overwritten commit); restore that file from a copy of the table (a " \
                   "Delta log cannot be rebuilt from the data files)"


# Runs as root of a user namespace of its own, where it can mount a 1 MiB tmpfs: a real full disk.
_FULL_DISK = """
import os, sys
from pathlib import Path
import pyarrow.parquet as pq
from specmetrics.schemas.arrow import REQUEST_STEP_SCHEMA
from specmetrics.storage.layout import FileName
from specmetrics.storage.table import DataFile, Table
from tests.support.full_disk import fill, mount_tmpfs

disk = Path(sys.argv[1])
mount_tmpfs(disk, "1m")
table, name = Table(disk / "data", create=True), FileName("log", 0, 0, 9, "a" * 12)
file = disk / "data" / "dt=2026-11-30" / "hour=12" / name.render("parquet")
file.parent.mkdir(parents=True)
pq.write_table(REQUEST_STEP_SCHEMA.empty_table(), file)
fd = fill(disk)
version = table.version()
try:
    table.commit(name, [DataFile.local(disk / "data", file)])
    sys.exit("the commit did not fail")
except OSError as exc:
    print(f"errno {exc.errno}: {exc.strerror}")
assert Table(disk / "data").version() == version and Table(disk / "data").position("log", 0) is None
os.close(fd)
(disk / "filler").unlink()
table.commit(name, [DataFile.local(disk / "data", file)])  # the same flush, once the disk has room
assert Table(disk / "data").position("log", 0) == 10
"""


def test_a_full_disk_at_the_commit_names_the_error_and_the_table(tmp_path: Path) -> None:
    """It said "DATA: Generic LocalFileSystem error"."""
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", sys.executable, "-c", _FULL_DISK,
                           str(tmp_path)], cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == f"errno 28: {tmp_path}/data: Generic LocalFileSystem error: Unable to copy data " \
                                  "to file: No space left on device (os error 28)"
