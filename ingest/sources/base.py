"""The source extension point: where the ingester reads encoded step messages from."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import NamedTuple

#: Called with ``{partition: committed offset}`` (None where the source holds none: a new reader,
#: or offsets lost) for partitions this reader now owns; returns where to read each from (None:
#: the source's first offset). The committed offsets are a hint: the stored files decide.
OnAssigned = Callable[[dict[int, int | None]], dict[int, int | None]]
#: Called with the partitions this reader is about to lose; must flush and commit them.
OnRevoked = Callable[[list[int]], None]
#: Called with the partitions this reader has lost already (evicted from its group): another
#: reader may own them, so nothing of them may be written or committed any more.
OnLost = Callable[[list[int]], None]


class SourceUnavailable(ConnectionError):
    """The source cannot be reached, or failed in the middle of a request (a broker down): the
    message says which in one line. Trying again later may succeed."""


class SourceRecord(NamedTuple):
    """One message with its position in the source."""

    partition: int
    offset: int
    value: bytes
    #: Why the record cannot be read at all (a corrupt frame, a Kafka tombstone); the ingester stores
    #: it as a dead letter with this reason and ``value`` as its bytes.
    error: str | None = None


class LostRange(NamedTuple):
    """Offsets ``first`` to ``last`` of a partition whose records are gone from the source (bytes
    deleted or truncated, or removed before they were read): nothing of them can be stored."""

    partition: int
    first: int
    last: int
    reason: str


class SourceWentBack(ValueError):
    """A partition of the source ends before what was read of it: its records are gone (a topic
    recreated, a broker that lost its data). ``end``: the source's next offset; ``position``: the
    reader's."""

    def __init__(self, source: str, partition: int, end: int, position: int) -> None:
        super().__init__(f"partition {partition} of {source} ends at offset {end}, but it was read to offset "
                         f"{position - 1}: the topic was recreated or the broker lost its data")
        self.source, self.partition, self.end, self.position = source, partition, end, position


class Source(ABC):
    """A partitioned, offset-addressed log (the local log, Kafka).

    The ingester commits an offset only after the Parquet files holding everything before it
    are durable. The committed offset is only a hint: a restart resumes where the stored files
    end (:mod:`ingest.recovery`), so a commit that was lost, expired or never made neither
    removes nor repeats anything. Sources whose
    partitions move between readers (a Kafka consumer group) report it through
    :meth:`listen`; all methods are called from one thread.
    """

    #: Stable name used in output file names (letters, digits, ``_``).
    name: str
    #: What tells this source apart from another of the same name (a local log's id), or None where
    #: nothing does: a table claims a name for one identity (:meth:`storage.table.Table.claim`).
    identity: str | None = None

    @abstractmethod
    def poll(self, max_records: int, timeout_s: float) -> list[SourceRecord]:
        """Up to ``max_records`` records, in offset order per partition; waits at most
        ``timeout_s`` when nothing is available, then returns an empty list."""

    def losses(self) -> list[LostRange]:
        """The offset ranges the last :meth:`poll` found gone, oldest first: they come before
        every record that poll returned. The default: none."""
        return []

    @abstractmethod
    def committed(self) -> dict[int, int | None]:
        """For each assigned partition, the committed next offset to read; None where the
        source holds none (a new reader, or its offsets were lost or expired)."""

    @abstractmethod
    def commit(self, next_offsets: dict[int, int]) -> bool:
        """Durably record that everything before ``next_offsets`` is stored. False when the
        commit was refused because this reader no longer owns the partitions (evicted, or its
        group is rebalancing): nothing was committed, and they will be assigned again."""

    def listen(self, assigned: OnAssigned, revoked: OnRevoked, lost: OnLost) -> None:
        """Register the assignment callbacks. The default: every partition is this reader's
        for good, so ``assigned`` is called once, now, and reading starts where it says."""
        self.seek(assigned(self.committed()))

    @abstractmethod
    def seek(self, positions: dict[int, int | None]) -> None:
        """Read each partition from its offset in ``positions`` (None: from the first one
        the source holds). An offset the source cannot read from is an error (``ValueError``):
        never a silent jump to another one."""

    def at_end(self) -> bool:
        """After an empty poll: has everything written so far been read? The default: yes."""
        return True

    def rebalancing_s(self) -> float:
        """Seconds this reader has waited for its group to hand it partitions (a rebalance that
        has not completed); 0 when it holds its share. The default: its partitions never move."""
        return 0.0

    def lag(self) -> int | None:
        """Records written but not yet read, if the source knows."""
        return None

    def partition_lag(self) -> dict[int, int]:
        """Records written but not yet read, per assigned partition whose lag the source knows.
        The default: none known."""
        return {}

    def ends(self, partitions: list[int]) -> dict[int, int] | None:
        """The offset after the last record of each of ``partitions``, assigned to this reader or
        not; None when the source cannot tell now. The default: cannot tell."""
        return None

    def close(self) -> None:
        """Release resources. The default does nothing."""
