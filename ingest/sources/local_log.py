"""The embedded local log as a source, with its committed offset in a state file."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from emitter.log import LocalLogReader
from ingest.durable import write_atomically
from ingest.sources.base import Source, SourceRecord

_POLL_INTERVAL_S = 0.05


class LocalLogSource(Source):
    """Reads one local log directory as partition 0. The committed offset lives in
    ``<state_dir>/<name>.offsets.json`` (the ingester keeps it beside its output)."""

    def __init__(self, log_dir: Path | str, state_dir: Path | str) -> None:
        self.log_dir = Path(log_dir)
        if not self.log_dir.is_dir():
            raise FileNotFoundError(f"local log directory {self.log_dir} does not exist")
        self.name = re.sub(r"[^A-Za-z0-9_]", "_", self.log_dir.resolve().name) or "log"
        self._state_file = Path(state_dir) / f"{self.name}.offsets.json"
        self._reader = LocalLogReader(self.log_dir, self.committed()[0])

    def poll(self, max_records: int, timeout_s: float) -> list[SourceRecord]:
        deadline = time.monotonic() + timeout_s
        while True:
            records = self._reader.read(max_records)
            if records or time.monotonic() >= deadline:
                return [SourceRecord(0, r.offset, r.payload) for r in records]
            time.sleep(_POLL_INTERVAL_S)

    def committed(self) -> dict[int, int]:
        try:
            return {0: int(json.loads(self._state_file.read_text())["0"])}
        except FileNotFoundError:
            return {0: 0}

    def commit(self, next_offsets: dict[int, int]) -> bool:
        write_atomically(self._state_file, json.dumps({str(p): o for p, o in next_offsets.items()}).encode())
        return True
