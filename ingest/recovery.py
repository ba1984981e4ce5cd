"""Where to resume a partition of the table: its log is the truth, the committed offset a hint.

A commit is atomic (a flush's files and the partition's next offset in one log entry), so no flush
is ever half stored. The partition resumes where the log says its stored offsets end:

* no committed offset (a new consumer group, offsets expired or deleted, a broker that lost
  them), or one behind the log (the source's commit of a committed flush was lost): the log
  wins, and nothing is read twice;
* a committed offset past the log (a commit lost from the log, the table restored to an older
  version, or the offsets committed for another output): the offsets in between are read again
  from the source, never skipped;
* nothing stored and no committed offset: from the source's first offset.

The event ids of the last steps stored (:func:`recent_steps`) let a new owner of the partition set
aside a step its producer sent again.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from pathlib import PurePosixPath

import pyarrow.compute as pc

from specmetrics.storage.layout import FileName
from specmetrics.storage.table import Table, TableFile

logger = logging.getLogger(__name__)


def resume_position(table: Table, source: str, partition: int, committed: int | None) -> int | None:
    """Where to resume reading a partition of the table, given its committed offset (see the module
    docstring); None: nothing stored and nothing committed."""
    position = table.position(source, partition)
    data_end = table.data_end(source, partition)
    if position is not None and data_end is not None and data_end < position:
        logger.warning("partition %d of %s: %s's log says offsets up to %d are stored, but the data files it holds end "
                       "at offset %d (the table restored to an older version, or files taken out of its log): reading "
                       "offsets %d-%d again from the source", partition, source, table.url, position - 1, data_end - 1,
                       data_end, position - 1)
        position = data_end
    if committed is not None and committed > (position or 0):
        logger.warning("partition %d of %s: the committed offset %d is past where %s's log ends (offset %d): its log "
                       "lacks the commits of offsets %d-%d (a commit lost, the table restored to an older version, "
                       "or the offsets committed for another output); reading them again from the source",
                       partition, source, committed, table.url, position or 0, position or 0, committed - 1)
        return position
    return _reconcile(table, source, partition, position, committed)


def _reconcile(table: Table, source: str, partition: int, stored_end: int | None,
               committed: int | None) -> int | None:
    """The resume position, given where the log says a partition's stored offsets end and its
    committed offset (not past them)."""
    if stored_end is None or committed == stored_end:
        return committed
    if committed is None:
        logger.warning("partition %d of %s has no committed offset (a new group, or its offsets were lost or "
                       "expired); resuming after the offsets %s holds, at offset %d", partition, source, table.url,
                       stored_end)
    else:
        logger.warning("partition %d of %s: the committed offset %d is behind the offsets %s holds, which end at "
                       "offset %d (the commit of their flush was lost); resuming there", partition, source,
                       committed, table.url, stored_end)
    return stored_end


def recent_steps(table: Table, source: str, partition: int, limit: int) -> OrderedDict[str, int]:
    """The event ids of the last ``limit`` or so steps the partition's committed files hold, each
    with its offset, oldest first: what the ingester remembers to set aside a step sent again after
    a restart. Files another engine's OPTIMIZE wrote (no source in their names) are read too where
    their statistics say they may hold the partition: that OPTIMIZE merged the latest flushes into
    them. Their rows of another source's partition of the same number add event ids that none of
    this source's steps has (and may take some of the ``limit``)."""
    columns = ["log_partition", "log_offset", "event_id"]
    held: list[tuple[int, str, TableFile]] = []
    for file in table.files():
        name = FileName.parse(PurePosixPath(file.relative).name)
        if name is None and file.may_hold_partition(partition):
            held.append((2**63 if file.last_offset is None else file.last_offset, file.relative, file))
        elif name is not None and name.source == source and name.partition == partition:
            held.append((name.end, file.relative, file))
    held.sort(reverse=True)
    steps: list[tuple[int, str]] = []
    for _, _, file in held:
        if len(steps) >= limit:
            break
        stored = table.read(file, columns)
        stored = stored.filter(pc.equal(stored["log_partition"], partition))
        pairs = stored.group_by(["log_offset", "event_id"]).aggregate([])
        steps.extend(zip(pairs["log_offset"].to_pylist(), map(str, pairs["event_id"].to_pylist()), strict=True))
    steps.sort()
    return OrderedDict((event_id, offset) for offset, event_id in steps[-limit:])
