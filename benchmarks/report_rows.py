"""Synthetic request-step rows for the report benchmark: a table of zstd Parquet files in
the stored schema (schemas.arrow.REQUEST_STEP_SCHEMA), one file per hour, laid out as the ingester
writes them (steps of 64 requests sharing the step's envelope) with a realistic mix: 4 engines
(K = 3 and 5) interleaved step by step, ~80 % drafted, whole steps skipped when the batch's
context passes the drafter's limit, grammar-invalid and K = 0 request-steps; each step carries
vLLM's own counters of it (schema 1.6 on), as vLLM 0.32.0 counts those outcomes. Deterministic for
a seed; cached by row count and layout version. Files are named as the ingester names them
(source ``bench``, partition 0, each file's offset range) and committed in one commit."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from specmetrics.ingest import IngestSettings
from specmetrics.schemas.arrow import REQUEST_STEP_SCHEMA
from specmetrics.schemas.codes import KIND_CODES, KindCode
from specmetrics.storage.layout import DATA_GLOB, FileName
from specmetrics.storage.table import DataFile, create_table, is_table

START = datetime(2026, 11, 30, 0, 0)
ENGINES = ("node-0/dp0", "node-1/dp0", "node-2/dp0", "node-3/dp0")
MODELS = ("llama-8b", "qwen-7b")
KINDS = tuple(kind.value for kind in KIND_CODES)  # the stored dictionary, indexed by code
K_ZERO_REASONS = ("no_proposal", "length_trim", "grammar_truncated", "schedule")
DRAFTER_MAX_LEN = 3800
MAX_MODEL_LEN = 8192  # the target's, served in full: a V1 runner skips drafting past the drafter's instead
BATCH = 64
FILES = 10


def whole_steps(rows: int, files: int = FILES) -> int:
    """``rows`` rounded down to whole steps of :data:`BATCH` request-steps in each of ``files`` files."""
    return rows // (files * BATCH) * files * BATCH


def build_table(root: Path, rows: int, files: int = FILES, seed: int = 0) -> Path:
    """``root``: a table of ``rows`` rows in ``files`` hourly files; reused if already complete."""
    if rows != whole_steps(rows, files) or rows == 0:
        raise ValueError(f"{rows} rows are not whole steps of {BATCH} in {files} files: round with whole_steps")
    done = root / f".complete-{rows}-{files}-{seed}-steps{BATCH}-named-counted"
    steps = rows // files // BATCH
    if not done.exists():
        settings = IngestSettings()
        for i in range(files):
            table = _rows(steps, i, np.random.default_rng(seed + i))
            folder = root / f"dt={START:%Y-%m-%d}" / f"hour={i:02d}"
            folder.mkdir(parents=True, exist_ok=True)
            name = FileName("bench", 0, i * steps, (i + 1) * steps - 1).render("parquet")
            pq.write_table(table, folder / name, compression=settings.compression,
                           row_group_size=settings.row_group_rows)
        done.touch()
    if not is_table(root):  # a tree this cache held before: committed as it is
        create_table(root, [DataFile.local(root, path) for path in sorted(root.glob(DATA_GLOB))],
                     {("bench", 0): files * steps})
    return root


def _dictionary(codes: np.ndarray, values: tuple[str, ...]) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)), pa.array(values))


def _rows(steps: int, hour: int, rng: np.random.Generator) -> pa.Table:
    """Rows as the ingester stores them: ``steps`` steps of BATCH requests at log offsets
    ``hour * steps`` on, one engine per step, the step's envelope (engine, time, context, K)
    shared by its rows; skipping for length is batch-wide."""
    n = steps * BATCH
    step_engine = rng.integers(0, len(ENGINES), steps)
    step_context = rng.integers(32, 4096, steps).astype(np.int32)
    engine = np.repeat(step_engine, BATCH)
    k = np.where(engine % 2 == 0, 3, 5).astype(np.int16)
    context = np.repeat(step_context, BATCH)
    draw = rng.random(n)
    kind = np.select([context > DRAFTER_MAX_LEN, draw < 0.03, draw < 0.11],
                     [KindCode.SKIPPED_FOR_LENGTH.value, KindCode.GRAMMAR_INVALID.value, KindCode.K_ZERO.value],
                     KindCode.DRAFTED.value)
    drafted = kind == KindCode.DRAFTED.value
    grammar = kind == KindCode.GRAMMAR_INVALID.value
    k_zero = kind == KindCode.K_ZERO.value
    accepted_draw = np.minimum(rng.geometric(0.35, n) - 1, k).astype(np.int16)
    invalid = np.where(grammar, rng.integers(1, k + 1), 0).astype(np.int16)
    k_sched = np.where(k_zero, 0, k).astype(np.int16)
    k_valid = (k_sched - invalid).astype(np.int16)
    accepted = np.where(drafted, accepted_draw, np.where(grammar, np.minimum(accepted_draw, k_valid), 0))
    step = np.arange(n) // BATCH
    micros = hour * 3_600_000_000 + step.astype(np.int64) * (3_600_000_000 // steps)
    event_time = pa.array(np.datetime64(START, "us") + micros.astype("timedelta64[us]"), pa.timestamp("us"))
    ids = pc.cast(pa.array(step, pa.int64()), pa.string())
    columns = {
        "schema_version": _dictionary(np.zeros(n), ("1.6",)),
        "event_id": pc.dictionary_encode(pc.binary_join_element_wise(f"h{hour}-", ids, "")),
        "engine_id": _dictionary(engine, ENGINES),
        "engine_instance": _dictionary(engine, tuple(e.split("/")[0] for e in ENGINES)),
        "dp_rank": pa.array(np.zeros(n, np.int16)),
        "model": _dictionary(engine % 2, MODELS),
        "vllm_version": _dictionary(np.zeros(n), ("0.32.0",)),
        "method": _dictionary(np.zeros(n), ("draft_model",)),
        "num_spec_tokens": pa.array(k),
        "drafter_max_len": pa.array(np.full(n, DRAFTER_MAX_LEN, np.int32)),
        "step_index": pa.array(step.astype(np.int64)),
        "event_time": event_time,
        "batch_max_seq_len": pa.array(context),
        "drafts_verified": pa.nulls(n, pa.int32()),
        "max_model_len": pa.array(np.full(n, MAX_MODEL_LEN, np.int32)),
        "context_cap_from": pa.nulls(n, pa.int32()),
        "skip_check": _dictionary(np.zeros(n), ("observed",)),
        "log_source": _dictionary(np.zeros(n), ("log",)),
        "log_partition": pa.array(np.zeros(n, np.int32)),
        "log_offset": pa.array(step.astype(np.int64) + hour * steps),
        "request_id": pc.binary_join_element_wise(
            f"r{hour}-", pc.cast(pa.array((np.arange(n) % BATCH) + step // 50 * BATCH), pa.string()), ""),
        "kind": _dictionary(kind, KINDS),
        "k_zero_reason": pa.DictionaryArray.from_arrays(
            pa.array(rng.integers(0, len(K_ZERO_REASONS), n).astype(np.int32), mask=~k_zero), pa.array(K_ZERO_REASONS)),
        "k_sched": pa.array(k_sched),
        "k_valid": pa.array(k_valid),
        "k_invalid": pa.array(invalid),
        "accepted": pa.array(accepted.astype(np.int16)),
        "emitted": pa.array(np.where(k_zero, 1, accepted + 1).astype(np.int16)),
        # each request's own length: up to 600 tokens below the step's longest, so a skipped step
        # holds requests that fit the drafter alone (collateral skips) and the ones that did not
        "seq_len": pa.array(np.maximum(context - rng.integers(0, 600, n), 1).astype(np.int32)),
    }
    columns.update(_vllm_counts(step, k, k_sched, k_valid, accepted))
    # per-request counters (1.7), vllm_only (1.8): none here
    return pa.table({field.name: columns.get(field.name, pa.nulls(n, field.type))
                     for field in REQUEST_STEP_SCHEMA}).cast(REQUEST_STEP_SCHEMA)


def _vllm_counts(step: np.ndarray, k: np.ndarray, k_sched: np.ndarray, k_valid: np.ndarray,
                 accepted: np.ndarray) -> dict[str, pa.Array]:
    """vLLM's own counters of each step on each of its rows: a draft is a request-step with a
    scheduled draft token, its tokens the valid ones, the accepted ones, and per position the drafts
    that accepted past it (K long)."""
    starts = np.arange(0, len(step), BATCH)
    drafted = k_sched > 0

    def per_step(values: np.ndarray) -> np.ndarray:
        return np.add.reduceat(values.astype(np.int32), starts)[step]

    widest = int(k.max())
    per_pos = np.stack([np.add.reduceat((drafted & (accepted > p)).astype(np.int32), starts) for p in range(widest)],
                       axis=1)[step]
    lists = pa.ListArray.from_arrays(pa.array(np.concatenate([[0], np.cumsum(k, dtype=np.int32)]), pa.int32()),
                                     pa.array(per_pos[np.arange(widest)[None, :] < k[:, None]], pa.int32()))
    return {"vllm_num_drafts": pa.array(per_step(drafted)),
            "vllm_num_draft_tokens": pa.array(per_step(np.where(drafted, k_valid, 0))),
            "vllm_num_accepted_tokens": pa.array(per_step(np.where(drafted, accepted, 0))),
            "vllm_accepted_per_pos": lists}
