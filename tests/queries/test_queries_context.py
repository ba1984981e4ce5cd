"""Schema 1.3: the context vLLM served and lowered for the drafter (context_caps), whether skips for
length could be seen (skip_checks), and trees written before 1.3 next to newer files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from specmetrics.queries import connect, run_query
from specmetrics.schemas.arrow import schema_before
from specmetrics.storage.layout import FileName
from tests.support.outcomes import commit_files


def test_context_caps_names_each_engine_whose_context_vllm_lowered(connect_rows: Any, outcomes: Any) -> None:
    con = connect_rows([
        outcomes.drafted(3, 3, engine_instance="capped", max_model_len=2048, context_cap_from=131072,
                         drafter_max_len=2048),
        outcomes.drafted(3, 1, engine_instance="capped", max_model_len=2048, context_cap_from=131072,
                         drafter_max_len=2048),
        outcomes.drafted(3, 2, engine_instance="free", max_model_len=512, drafter_max_len=96),
        outcomes.drafted(3, 2, engine_instance="old"),  # before 1.3: says nothing
    ])
    rows = run_query(con, "SELECT engine_id, max_model_len, context_cap_from, drafter_max_len, capped, summary "
                          "FROM context_caps").to_pylist()
    assert rows == [
        {"engine_id": "capped/dp0", "max_model_len": 2048, "context_cap_from": 131072, "drafter_max_len": 2048,
         "capped": True, "summary": "context capped from 131,072 to 2,048 by the drafter"},
        {"engine_id": "free/dp0", "max_model_len": 512, "context_cap_from": None, "drafter_max_len": 96,
         "capped": False, "summary": "context 512, not capped"},
    ]


def test_skip_share_is_null_where_skips_could_not_be_seen(connect_rows: Any, outcomes: Any) -> None:
    con = connect_rows([
        outcomes.skipped(3, engine_instance="v1", skip_check="observed"),
        outcomes.drafted(3, 3, engine_instance="v1", skip_check="observed"),
        outcomes.drafted(3, 3, engine_instance="v2", skip_check="none"),
        outcomes.drafted(3, 3, engine_instance="blind", skip_check="observed"),
        outcomes.drafted(3, 3, engine_instance="blind", skip_check="unobserved"),
        outcomes.drafted(3, 3, engine_instance="old"),
    ])
    rows = run_query(con, "SELECT engine_id, observed_steps, none_steps, unobserved_steps, unreported_steps, skips, "
                          "skipped_steps, skip_share FROM skip_checks").to_pylist()
    assert rows == [
        {"engine_id": "blind/dp0", "observed_steps": 1, "none_steps": 0, "unobserved_steps": 1, "unreported_steps": 0,
         "skips": "unknown", "skipped_steps": 0, "skip_share": None},
        {"engine_id": "old/dp0", "observed_steps": 0, "none_steps": 0, "unobserved_steps": 0, "unreported_steps": 1,
         "skips": "unreported", "skipped_steps": 0, "skip_share": 0.0},
        {"engine_id": "v1/dp0", "observed_steps": 2, "none_steps": 0, "unobserved_steps": 0, "unreported_steps": 0,
         "skips": "observed", "skipped_steps": 1, "skip_share": 0.5},
        {"engine_id": "v2/dp0", "observed_steps": 0, "none_steps": 1, "unobserved_steps": 0, "unreported_steps": 0,
         "skips": "impossible", "skipped_steps": 0, "skip_share": 0.0},
    ]


def _write_1_2_file(folder: Path, row: dict[str, Any]) -> None:
    """A data file as schema 1.1 and 1.2 wrote it: REQUEST_STEP_SCHEMA without the columns of 1.3."""
    schema = schema_before("1.3")
    folder.mkdir(parents=True, exist_ok=True)
    name = FileName("old", 0, row["log_offset"], row["log_offset"]).render("parquet")
    pq.write_table(pa.Table.from_pylist([row], schema=schema), folder / name)
    commit_files(folder.parents[1], [folder / name])


def test_files_written_before_schema_1_3_are_read_alone_and_beside_newer_files(tmp_path: Path, outcomes: Any) -> None:
    tree = tmp_path / "data"
    _write_1_2_file(tree / "dt=2025-01-01" / "hour=10", outcomes.drafted(3, 2, drafts_verified=5))
    con = connect(tree)
    query = ("SELECT drafts_verified, max_model_len, context_cap_from, skip_check, seq_len FROM request_steps "
             "ORDER BY ALL")
    assert run_query(con, query).to_pylist() == [
        {"drafts_verified": 5, "max_model_len": None, "context_cap_from": None, "skip_check": None, "seq_len": None}]
    con.close()
    outcomes.write_table(tree, [outcomes.drafted(3, 3, log_partition=1, max_model_len=96, context_cap_from=256,
                                                skip_check="none", seq_len=70)])
    con = connect(tree)
    assert run_query(con, query).to_pylist() == [  # NULLs last
        {"drafts_verified": 5, "max_model_len": None, "context_cap_from": None, "skip_check": None, "seq_len": None},
        {"drafts_verified": None, "max_model_len": 96, "context_cap_from": 256, "skip_check": "none", "seq_len": 70}]
    assert [r["summary"] for r in run_query(con, "SELECT summary FROM context_caps").to_pylist()] == [
        "context capped from 256 to 96 by the drafter"]
    con.close()
