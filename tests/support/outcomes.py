"""Request-step rows for the query and report tests: dicts with defaults, written as Parquet in
REQUEST_STEP_SCHEMA into a hive tree ``dt=YYYY-MM-DD/hour=HH/``.

Tests reach the builders through the ``outcomes`` fixture (an :class:`OutcomeRows`); property tests
draw rows' fields from :func:`outcome`.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st

from specmetrics.schemas.arrow import REQUEST_STEP_SCHEMA
from specmetrics.schemas.codes import K_ZERO_REASON_CODE, KIND_CODE
from specmetrics.schemas.events import KZeroReason, OutcomeKind, engine_id
from specmetrics.schemas.validation import invalid_outcome_rows
from specmetrics.storage.layout import FileName
from specmetrics.storage.table import DataFile, Table, create_table, is_table

Row = dict[str, Any]

DEFAULTS: Row = {
    "schema_version": "1.0",
    "engine_instance": "a",
    "dp_rank": 0,
    "model": "tiny-llama",
    "vllm_version": "0.32.0",
    "method": "draft_model",
    "num_spec_tokens": 3,
    "drafter_max_len": 96,
    "step_index": 0,
    "event_time": datetime(2025, 1, 1, 10, 30),
    "batch_max_seq_len": 64,
    "log_partition": 0,
    "request_id": "req-0",
    "kind": "drafted",
    "k_zero_reason": None,
    "k_invalid": 0,
    "accepted": 0,
}


class OutcomeRows:
    """Builds rows (every column of REQUEST_STEP_SCHEMA, defaults filled) and writes them as a tree."""

    def __init__(self) -> None:
        self._ids: Iterator[int] = itertools.count()

    def row(self, **overrides: Any) -> Row:
        """A row: DEFAULTS, then ``overrides``; engine_id, event_id, log_offset, k_sched (= k_valid),
        k_valid (= k_sched) and emitted (= accepted + 1, 0 for k_zero) are derived when not given."""
        n = next(self._ids)
        row = {**DEFAULTS, "event_id": f"ev-{n}", "log_offset": n, **overrides}
        row.setdefault("engine_id", engine_id(row["engine_instance"], row["dp_rank"]))
        if "k_sched" not in row:
            row["k_sched"] = row.get("k_valid", 0)
        row.setdefault("k_valid", row["k_sched"])
        row.setdefault("emitted", 0 if row["kind"] == "k_zero" else row["accepted"] + 1)
        return row

    def drafted(self, k_valid: int, accepted: int, **kw: Any) -> Row:
        return self.row(kind="drafted", k_sched=k_valid, k_valid=k_valid, accepted=accepted, **kw)

    def skipped(self, k_sched: int, accepted: int = 0, **kw: Any) -> Row:
        """Skipped for length: placeholders, all verified (k_valid = k_sched)."""
        return self.row(kind="skipped_for_length", k_sched=k_sched, k_valid=k_sched, accepted=accepted, **kw)

    def grammar_async(self, k_valid: int, k_invalid: int, accepted: int, **kw: Any) -> Row:
        """Async scheduling: invalid drafts are -1 pads, scheduled but not verified."""
        return self.row(kind="grammar_invalid", k_sched=k_valid + k_invalid, k_valid=k_valid,
                        k_invalid=k_invalid, accepted=accepted, **kw)

    def grammar_sync(self, k_valid: int, k_invalid: int, accepted: int, **kw: Any) -> Row:
        """Sync scheduling: invalid drafts were truncated before scheduling."""
        return self.row(kind="grammar_invalid", k_sched=k_valid, k_valid=k_valid, k_invalid=k_invalid,
                        accepted=accepted, **kw)

    def grammar_rejected(self, k_valid: int, k_invalid: int, accepted: int, **kw: Any) -> Row:
        """Sync scheduling from vLLM 0.34: the first invalid draft was verified (and rejected)."""
        return self.row(kind="grammar_rejected", k_sched=k_valid + 1, k_valid=k_valid, k_invalid=k_invalid,
                        accepted=accepted, **kw)

    def k_zero(self, k_zero_reason: str, k_invalid: int = 0, **kw: Any) -> Row:
        return self.row(kind="k_zero", k_zero_reason=k_zero_reason, k_sched=0, k_valid=0, k_invalid=k_invalid,
                        accepted=0, **kw)

    def vllm_only(self, reason: str, num_drafts: int, num_draft_tokens: int, num_accepted_tokens: int,
                   **kw: Any) -> Row:
        """A step the plugin did not observe (schema 1.8): vLLM's own counters only."""
        return self.row(kind="vllm_only", request_id="*", k_sched=0, k_valid=0, accepted=0, emitted=0,
                        vllm_only=reason, vllm_num_drafts=num_drafts, vllm_num_draft_tokens=num_draft_tokens,
                        vllm_num_accepted_tokens=num_accepted_tokens, **kw)

    @staticmethod
    def check_valid(rows: list[Row]) -> None:
        """Fail on rows that break the contract's per-outcome rules (schemas/validation.py)."""
        cols = {
            "kind": np.array([KIND_CODE[OutcomeKind(r["kind"])] for r in rows]),
            "k_zero_reason": np.array([K_ZERO_REASON_CODE[None if r["k_zero_reason"] is None
                                                          else KZeroReason(r["k_zero_reason"])] for r in rows]),
            **{c: np.array([r[c] for r in rows]) for c in ("k_sched", "k_valid", "k_invalid", "accepted", "emitted")},
            "vllm_only": np.array([r.get("vllm_only") is not None for r in rows]),
        }
        bad, reasons = invalid_outcome_rows(cols, np.array([r["num_spec_tokens"] for r in rows]))
        assert not bad.any(), {i: (reasons[i], rows[i]) for i in reasons}

    def write_table(self, root: Path, rows: Iterable[Row]) -> Path:
        """Write ``rows`` under ``root/dt=YYYY-MM-DD/hour=HH/`` (from event_time) as one flush per
        log partition: per hour, a file named like the ingester's, ``test-<partition>-<first
        offset>-<last offset>.parquet``; and commit them to the table at ``root`` (made one if new)
        in one commit."""
        rows = list(rows)
        if rows:
            self.check_valid(rows)
        by_place: dict[tuple[int, str, str], list[Row]] = defaultdict(list)
        for row in rows:
            by_place[(row["log_partition"], f"{row['event_time']:%Y-%m-%d}", f"{row['event_time']:%H}")].append(row)
        root.mkdir(parents=True, exist_ok=True)
        written = []
        for (partition, dt, hour), part in by_place.items():
            offsets = [r["log_offset"] for r in rows if r["log_partition"] == partition]
            name = FileName("test", partition, min(offsets), max(offsets)).render("parquet")
            folder = root / f"dt={dt}" / f"hour={hour}"
            folder.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.Table.from_pylist(part, schema=REQUEST_STEP_SCHEMA), folder / name)
            written.append(folder / name)
        commit_files(root, written)
        return root


def commit_files(root: Path, paths: Sequence[Path]) -> None:
    """Commit the data files ``paths`` (under ``root``) to the table there, made one if new, in one
    commit that leaves the partitions' next offsets as they are (a new table: past the files)."""
    files = [DataFile.local(root, path) for path in paths]
    if is_table(root):
        Table(root).replace([], files)
        return
    positions: dict[tuple[str, int], int] = {}
    for path in paths:
        if (name := FileName.parse(path.name)) is not None:
            key = (name.source, name.partition)
            positions[key] = max(positions.get(key, 0), name.end + 1)
    create_table(root, files, positions)


#: (engine_instance, model, method, K): groups of different K side by side, and one whose model, method
#: and K have a published baseline (the view baselines).
GROUPS = [("a", DEFAULTS["model"], "draft_model", 1), ("a", DEFAULTS["model"], "draft_model", 3),
          ("b", DEFAULTS["model"], "ngram", 4), ("c", "/models/Qwen3-8B", "eagle3", 3)]
K_ZERO_REASONS = ["no_proposal", "length_trim", "grammar_truncated", "schedule", "unknown", "verify_budget",
                  "skip_drafts"]
TIMES = [datetime(2025, 1, 1, 10, 5), datetime(2025, 1, 1, 11, 59), datetime(2025, 1, 2, 0, 0)]


@st.composite
def outcome(draw: st.DrawFn) -> dict[str, Any]:
    """Keyword arguments of one row that keeps the rules of schemas/validation.py."""
    instance, model, method, k = draw(st.sampled_from(GROUPS))
    kind = draw(st.sampled_from(["drafted", "skipped_for_length", "grammar_invalid", "grammar_rejected", "k_zero"]))
    k_invalid, k_zero_reason = 0, None
    if kind == "drafted":
        k_valid = draw(st.integers(1, k))
        k_sched = k_valid
    elif kind == "skipped_for_length":
        k_sched = draw(st.integers(0, k))
        k_valid = draw(st.integers(0, k_sched))
        k_invalid = k_sched - k_valid
    elif kind == "grammar_invalid":
        if draw(st.booleans()):  # async: invalid drafts are -1 pads
            k_valid = draw(st.integers(0, k - 1))
            k_invalid = draw(st.integers(1, k - k_valid))
            k_sched = k_valid + k_invalid
        else:  # sync: invalid drafts were truncated
            k_valid = k_sched = draw(st.integers(1, k))
            k_invalid = draw(st.integers(1, k))
    elif kind == "grammar_rejected":  # sync from vLLM 0.34: the first invalid draft verified
        k_valid = draw(st.integers(0, k - 1))
        k_sched = k_valid + 1
        k_invalid = draw(st.integers(1, k - k_valid))
    else:
        k_valid = k_sched = 0
        k_zero_reason = draw(st.sampled_from(K_ZERO_REASONS))
        k_invalid = draw(st.integers(1, k)) if k_zero_reason == "grammar_truncated" else 0
        if k_zero_reason == "verify_budget":  # scheduled, none verified: vLLM counts them
            k_sched = draw(st.integers(1, k))
            k_valid = draw(st.integers(0, k_sched))
            k_invalid = k_sched - k_valid
    accepted = 0 if kind == "k_zero" else draw(st.integers(0, k_valid))
    return {
        "engine_instance": instance, "model": model, "method": method, "num_spec_tokens": k, "kind": kind,
        "k_zero_reason": k_zero_reason, "k_sched": k_sched, "k_valid": k_valid, "k_invalid": k_invalid,
        "accepted": accepted, "emitted": draw(st.integers(0, accepted + 1)),
        "event_time": draw(st.sampled_from(TIMES)), "request_id": draw(st.sampled_from(["r1", "r2", "r3"])),
        "batch_max_seq_len": draw(st.one_of(st.none(), st.integers(1, 4096))),
        "seq_len": draw(st.one_of(st.none(), st.integers(0, 200))),  # the drafter fits 96 - K
    }


@st.composite
def audited_outcome(draw: st.DrawFn) -> dict[str, Any]:
    """An :func:`outcome` that is a step of its own with vLLM's counters of it: none (vLLM computed
    none), the counters vLLM 0.32.0 makes of that one outcome, or those with one count off by one
    (a vLLM that counts differently)."""
    fields = draw(outcome())
    counted = draw(st.sampled_from(["none", "equal", "vllm_num_drafts", "vllm_num_draft_tokens",
                                    "vllm_num_accepted_tokens", "vllm_accepted_per_pos"]))
    if counted == "none":
        return fields
    counts = vllm_counts_of(fields)
    if counted == "vllm_accepted_per_pos":
        counts[counted][draw(st.integers(0, fields["num_spec_tokens"] - 1))] += 1
    elif counted != "equal":
        counts[counted] += 1
    return {**fields, **counts}


def vllm_counts_of(row: Row) -> Row:
    """The counters vLLM 0.32.0 computes of a step whose one outcome is ``row``, written out here
    apart from the views' definitions."""
    k_sched, accepted = row["k_sched"], row["accepted"]
    drafted = k_sched > 0  # vLLM's draft: any scheduled draft token, whatever the kind
    tokens = k_sched if row["kind"] == "grammar_rejected" else row["k_valid"]
    return {"vllm_num_drafts": int(drafted), "vllm_num_draft_tokens": tokens if drafted else 0,
            "vllm_num_accepted_tokens": accepted if drafted else 0,
            "vllm_accepted_per_pos": [int(drafted and accepted > p) for p in range(row["num_spec_tokens"])]}
