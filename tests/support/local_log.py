"""Records for the local log tests: payloads that say their offset, a read of the whole log, and a
script that appends batches until it is killed."""

from __future__ import annotations

from pathlib import Path

from specmetrics.transport.log import LocalLogReader


def payload(offset: int) -> bytes:
    """A payload whose content says which offset it must be at."""
    return f"record-{offset}-".encode() * (1 + offset % 7)


def read_all(log_dir: Path, start: int = 0) -> list[tuple[int, bytes]]:
    reader = LocalLogReader(log_dir, start)
    out: list[tuple[int, bytes]] = []
    while batch := reader.read(1000):
        out += [(r.offset, r.payload) for r in batch]
    return out


#: Run with ``python -c WRITER <log dir>``: appends batches of 200 and prints each last offset.
WRITER = """
import sys
from specmetrics.transport.log import LocalLogWriter
from tests.support.local_log import payload
writer = LocalLogWriter(sys.argv[1], segment_bytes=256 * 1024)
offset = 0
while True:
    first, last = writer.append([payload(o) for o in range(offset, offset + 200)])
    print(last, flush=True)
    offset = last + 1
"""
