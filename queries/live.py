"""The live endpoint's totals: the views' own SQL over a histogram of request-steps.

The live metrics count what an ingester validates by outcome shape, not by metric. At each scrape
that histogram becomes the table ``live_histogram`` of a small DuckDB connection whose
``outcome_histogram_between`` reads it (``sql/live/live_histogram.sql``); the definitions and the
views the counters come from are the catalog's own files, unchanged, and ``live_totals`` collects
them per group. So every live counter is defined where the views' numbers are, once.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import pyarrow as pa

from specmetrics.queries.catalog import file_statements, sql_files

LIVE_SOURCE = "live_histogram"
#: The table the live metrics hand over: outcome_histogram's columns, without the draft flags.
LIVE_HISTOGRAM_SCHEMA = pa.schema([
    ("engine_id", pa.string()), ("model", pa.string()), ("method", pa.string()),
    ("num_spec_tokens", pa.int16()), ("kind", pa.string()), ("k_zero_reason", pa.string()),
    ("k_sched", pa.int16()), ("k_valid", pa.int16()), ("k_invalid", pa.int16()), ("accepted", pa.int16()),
    ("request_steps", pa.int64()), ("emitted", pa.int64()),
])
#: The view files of the live connection past the definitions, in the order they run.
LIVE_FILES: tuple[str, ...] = (
    "live/live_histogram.sql",
    "intermediate/acceptance_by_definition.sql",
    "intermediate/outcome_counts.sql",
    "intermediate/position_counts.sql",
    "metrics/acceptance.sql",
    "metrics/acceptance_vllm.sql",
    "metrics/outcome_shares.sql",
    "metrics/wasted_verification.sql",
    "live/live_totals.sql",
)


@dataclass(frozen=True, slots=True)
class RequestStepCount:
    """Request-steps of one outcome kind and ``k_zero`` reason (None unless ``k_zero``)."""

    kind: str
    k_zero_reason: str | None
    request_steps: int


@dataclass(frozen=True, slots=True)
class GroupTotals:
    """One row of the view ``live_totals``: every live counter of one group."""

    engine_id: str
    model: str
    method: str
    num_spec_tokens: int
    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    vllm_num_drafts: int
    vllm_num_draft_tokens: int
    vllm_num_accepted_tokens: int
    num_accepted_per_position: list[int]
    num_reached_per_position: list[int]
    vllm_num_accepted_per_position: list[int]
    request_steps: list[RequestStepCount]
    emitted_tokens: int
    verified_slots: int
    placeholder_slots: int
    pad_slots: int


class LiveTotals:
    """A DuckDB connection that turns a live histogram into :class:`GroupTotals`; one caller at a time."""

    def __init__(self) -> None:
        self._con = duckdb.connect(":memory:", config={"threads": 1, "python_enable_replacements": False})
        try:
            self._con.register(LIVE_SOURCE, LIVE_HISTOGRAM_SCHEMA.empty_table())
            for name in (*sql_files(("definitions",)), *LIVE_FILES):
                for statement in file_statements(name):
                    self._con.execute(statement)
        except BaseException:
            self._con.close()
            raise

    def totals(self, histogram: pa.Table) -> list[GroupTotals]:
        """Every group's totals over ``histogram`` (:data:`LIVE_HISTOGRAM_SCHEMA`), sorted by group."""
        self._con.register(LIVE_SOURCE, histogram.cast(LIVE_HISTOGRAM_SCHEMA))
        rows = self._con.sql("FROM live_totals").to_arrow_table().to_pylist()
        return [GroupTotals(**{**row, "request_steps": [RequestStepCount(**count) for count in row["request_steps"]]})
                for row in rows]

    def close(self) -> None:
        self._con.close()
