"""The observer extension point: what an ingester reports as it reads, before anything is stored.

The live metrics (:mod:`monitoring.live`) are one observer. Every report comes from the ingester's
polling thread, in offset order per partition; a partition read again (the source reconnected, or
the partition was assigned again) is reported again from where its stored files end, so an
observer that must not count twice keeps, per source and partition, where it got to.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from specmetrics.schemas.wire import WireStep


@dataclass(frozen=True, slots=True)
class ValidatedSteps:
    """Steps of one partition just validated: the rows of the valid ones (the rows the ingester
    stores) and the offsets of those set aside as dead letters, and of those, the copies of steps
    read before (:data:`ingest.batch.DUPLICATE_STEP`)."""

    partition: int
    rows: pa.RecordBatch | None
    steps: list[WireStep]
    step_offsets: np.ndarray
    dead_letter_offsets: list[int]
    duplicate_offsets: list[int]


class IngestObserver(ABC):
    """Told what the ingester validated, lost and has left to read."""

    @abstractmethod
    def validated(self, source: str, steps: ValidatedSteps) -> None:
        """Steps of ``source`` validated, with their rows and the dead letters among them."""

    @abstractmethod
    def lost(self, source: str, partition: int, first: int, last: int) -> None:
        """Offsets ``first`` to ``last`` of a partition were found gone and recorded as lost."""

    @abstractmethod
    def lag(self, source: str, records: dict[int, int]) -> None:
        """Records written to each partition of ``source`` this ingester reads, and not read yet."""

    def stalled(self, source: str, seconds: float) -> None:
        """How long the ingester of ``source`` has had work it does not do (:attr:`Ingester.stalled_s
        <ingest.ingester.Ingester.stalled_s>`); 0 while it keeps up. The default ignores it."""
