"""Schema 1.1 (adaptive verification): k_zero 'verify_budget' rows, the step's drafts_verified, and
trees written before 1.1 (no drafts_verified column), alone or next to newer files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from specmetrics.queries import connect, run_query
from specmetrics.queries.export import export_database
from specmetrics.schemas.arrow import schema_before
from specmetrics.storage.layout import FileName
from tests.support.outcomes import commit_files


def budget_zero(outcomes: Any, k_sched: int, k_invalid: int = 0, **kw: Any) -> dict[str, Any]:
    """Drafts scheduled (vLLM counts them), none verified."""
    return outcomes.row(kind="k_zero", k_zero_reason="verify_budget", k_sched=k_sched, k_valid=k_sched - k_invalid,
                        k_invalid=k_invalid, accepted=0, **kw)


def test_verify_budget_rows_count_for_vllm_only(connect_rows: Any, outcomes: Any) -> None:
    con = connect_rows([outcomes.drafted(3, 3), budget_zero(outcomes, 3), budget_zero(outcomes, 3, k_invalid=1)])
    corrected = run_query(con, "SELECT num_drafts, num_draft_tokens, num_accepted_tokens FROM acceptance").to_pylist()
    vllm = run_query(con, "SELECT num_drafts, num_draft_tokens, num_accepted_tokens FROM acceptance_vllm").to_pylist()
    assert corrected == [{"num_drafts": 1, "num_draft_tokens": 3, "num_accepted_tokens": 3}]
    assert vllm == [{"num_drafts": 3, "num_draft_tokens": 3 + 3 + 2, "num_accepted_tokens": 3}]
    k_zero_reasons = run_query(con, "SELECT k_zero_reason, request_steps, share_of_request_steps FROM k_zero_reasons")
    assert k_zero_reasons.to_pylist() == [{"k_zero_reason": "verify_budget", "request_steps": 2,
                                    "share_of_request_steps": pytest.approx(2 / 3)}]


def test_partial_budget_steps_give_the_exact_rate(connect_rows: Any, outcomes: Any) -> None:
    step_1 = [  # 6 drafts scheduled, 4 verified, 3 accepted (a step's rows share its log offset)
        outcomes.drafted(3, 2, event_id="s1", log_offset=100, request_id="a", drafts_verified=4),
        outcomes.drafted(3, 1, event_id="s1", log_offset=100, request_id="b", drafts_verified=4),
        outcomes.k_zero("no_proposal", event_id="s1", log_offset=100, request_id="c", drafts_verified=4),
    ]
    con = connect_rows([
        *step_1,
        # step 2: 3 scheduled, 1 verified, 0 accepted
        outcomes.drafted(3, 0, event_id="s2", log_offset=101, request_id="a", drafts_verified=1),
        # step 3: every draft verified (NULL): not a partial step
        outcomes.drafted(3, 3, event_id="s3", log_offset=102, request_id="a"),
    ])
    query = "SELECT * EXCLUDE (engine_id, model, method, num_spec_tokens) FROM adaptive_verification"
    assert run_query(con, query).to_pylist() == [{
        "steps": 2, "draft_tokens_scheduled": 9, "draft_tokens_verified": 5, "num_accepted_tokens": 3,
        "acceptance_rate_scheduled": pytest.approx(3 / 9), "acceptance_rate_verified": pytest.approx(3 / 5)}]
    window = run_query(con, "SELECT steps FROM adaptive_verification_between(?, ?)",
                       ["2025-01-01 11:00:00", None]).to_pylist()
    assert window == []

    # Step 1 delivered twice (at least once): counted twice, numerator and denominator alike.
    again = [{**row, "log_offset": 200} for row in step_1]
    con = connect_rows([*step_1, *again], name="twice")
    assert run_query(con, query).to_pylist() == [{
        "steps": 2, "draft_tokens_scheduled": 12, "draft_tokens_verified": 8, "num_accepted_tokens": 6,
        "acceptance_rate_scheduled": pytest.approx(6 / 12), "acceptance_rate_verified": pytest.approx(6 / 8)}]


def _write_1_0_file(folder: Path, outcomes: Any, source: str) -> None:
    """A data file of ``source`` as schema 1.0 wrote it: REQUEST_STEP_SCHEMA without the columns 1.1 and
    later added."""
    schema = schema_before("1.1")
    folder.mkdir(parents=True, exist_ok=True)
    row = outcomes.drafted(3, 2)
    name = FileName(source, 0, row["log_offset"], row["log_offset"]).render("parquet")
    pq.write_table(pa.Table.from_pylist([row], schema=schema), folder / name)
    commit_files(folder.parents[1], [folder / name])


def test_files_written_before_schema_1_1_are_read(tmp_path: Path, outcomes: Any) -> None:
    old = tmp_path / "old"
    _write_1_0_file(old / "dt=2025-01-01" / "hour=10", outcomes, "old")
    con = connect(old)
    assert run_query(con, "SELECT drafts_verified, k_valid FROM request_steps").to_pylist() == [
        {"drafts_verified": None, "k_valid": 3}]
    assert run_query(con, "SELECT * FROM adaptive_verification").num_rows == 0
    db = export_database(old, tmp_path / "old.duckdb")
    exported = duckdb.connect(str(db), read_only=True)
    assert exported.sql("SELECT count(*), count(drafts_verified) FROM request_steps").fetchall() == [(1, 0)]
    exported.close()

    # A 1.1 file next to it: both read, the old rows with NULL.
    outcomes.write_table(old, [outcomes.drafted(3, 1, request_id="new", drafts_verified=2)])
    con = connect(old)
    rows = run_query(con, "SELECT request_id, drafts_verified FROM request_steps ORDER BY request_id").to_pylist()
    assert rows == [{"request_id": "new", "drafts_verified": 2}, {"request_id": "req-0", "drafts_verified": None}]
