"""The Arrow schema of the stored table: one row per request-step, step context as columns.

Parquet files under ``dt=YYYY-MM-DD/hour=HH/`` hold exactly these columns (the partition keys
come from the directory names). Strings that repeat per step or per engine are dictionary
encoded; ``event_time`` is UTC, stored without a time zone (DuckDB scans it fastest that way).
"""

from __future__ import annotations

import pyarrow as pa

_DICT_STRING = pa.dictionary(pa.int32(), pa.string())

REQUEST_STEP_SCHEMA = pa.schema(
    [
        pa.field("schema_version", _DICT_STRING, nullable=False),
        pa.field("event_id", _DICT_STRING, nullable=False),
        pa.field("engine_id", _DICT_STRING, nullable=False),
        pa.field("engine_instance", _DICT_STRING, nullable=False),
        pa.field("dp_rank", pa.int16(), nullable=False),
        pa.field("model", _DICT_STRING, nullable=False),
        pa.field("vllm_version", _DICT_STRING, nullable=False),
        pa.field("method", _DICT_STRING, nullable=False),
        pa.field("num_spec_tokens", pa.int16(), nullable=False),
        pa.field("drafter_max_len", pa.int32()),
        pa.field("step_index", pa.int64(), nullable=False),
        pa.field("event_time", pa.timestamp("us"), nullable=False),
        pa.field("batch_max_seq_len", pa.int32()),
        pa.field("drafts_verified", pa.int32()),
        pa.field("max_model_len", pa.int32()),
        pa.field("context_cap_from", pa.int32()),
        pa.field("skip_check", _DICT_STRING),
        pa.field("log_source", _DICT_STRING),
        pa.field("log_partition", pa.int32(), nullable=False),
        pa.field("log_offset", pa.int64(), nullable=False),
        pa.field("request_id", pa.string(), nullable=False),
        pa.field("kind", _DICT_STRING, nullable=False),
        pa.field("k_zero_reason", _DICT_STRING),
        pa.field("k_sched", pa.int16(), nullable=False),
        pa.field("k_valid", pa.int16(), nullable=False),
        pa.field("k_invalid", pa.int16(), nullable=False),
        pa.field("accepted", pa.int16(), nullable=False),
        pa.field("emitted", pa.int16(), nullable=False),
        pa.field("seq_len", pa.int32()),
        pa.field("vllm_num_drafts", pa.int32()),
        pa.field("vllm_num_draft_tokens", pa.int32()),
        pa.field("vllm_num_accepted_tokens", pa.int32()),
        pa.field("vllm_accepted_per_pos", pa.list_(pa.int32())),
        pa.field("vllm_counts_missing", _DICT_STRING),
        pa.field("vllm_request_histogram", pa.list_(pa.int32())),
        pa.field("vllm_request_draft_tokens", pa.int32()),
        pa.field("vllm_request_accepted_per_step", pa.list_(pa.int32())),
        pa.field("vllm_request_drafted_per_step", pa.list_(pa.int32())),
        pa.field("vllm_only", _DICT_STRING),
    ],
    # In every data file written since 1.0: a stored name changes only with a major version.
    metadata={"specmetrics.table": "request_outcomes"},
)
#: The columns each minor version added to the stored table, oldest first.
ADDED_COLUMNS: dict[str, tuple[str, ...]] = {
    "1.1": ("drafts_verified",),
    "1.3": ("max_model_len", "context_cap_from", "skip_check"),
    "1.5": ("seq_len",),
    "1.6": ("vllm_num_drafts", "vllm_num_draft_tokens", "vllm_num_accepted_tokens", "vllm_accepted_per_pos",
            "vllm_counts_missing"),
    "1.7": ("vllm_request_histogram", "vllm_request_draft_tokens", "vllm_request_accepted_per_step",
            "vllm_request_drafted_per_step"),
    "1.8": ("vllm_only",),
    "1.9": ("log_source",),
}


def schema_before(version: str) -> pa.Schema:
    """The stored table as writers before ``version`` (a key of :data:`ADDED_COLUMNS`) wrote it: without
    the columns that version and later ones added."""
    versions = list(ADDED_COLUMNS)
    schema = REQUEST_STEP_SCHEMA
    for later in versions[versions.index(version):]:
        for name in ADDED_COLUMNS[later]:
            schema = schema.remove(schema.get_field_index(name))
    return schema
