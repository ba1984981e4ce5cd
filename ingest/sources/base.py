"""The source extension point: where the ingester reads encoded step messages from."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import NamedTuple


class SourceRecord(NamedTuple):
    """One message with its position in the source."""

    partition: int
    offset: int
    value: bytes


class Source(ABC):
    """A partitioned, offset-addressed log (the local log, later Kafka).

    The ingester commits an offset only after the Parquet files holding everything before it
    are durable, so a restart resumes exactly where the durable data ends.
    """

    #: Stable name used in output file names (letters, digits, ``_``).
    name: str

    @abstractmethod
    def poll(self, max_records: int, timeout_s: float) -> list[SourceRecord]:
        """Up to ``max_records`` records, in offset order per partition; waits at most
        ``timeout_s`` when nothing is available, then returns an empty list."""

    @abstractmethod
    def committed(self) -> dict[int, int]:
        """For each assigned partition, the next offset to read (0 for a new consumer)."""

    @abstractmethod
    def commit(self, next_offsets: dict[int, int]) -> None:
        """Durably record that everything before ``next_offsets`` is stored."""

    def close(self) -> None:
        """Release resources. The default does nothing."""
