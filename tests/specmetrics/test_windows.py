"""window_metrics and ratios: the numbers of one time window, by the views' macros."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from specmetrics.queries import connect
from specmetrics.windows import ratios, reproduces, window_collateral, window_metrics
from tests.support.outcomes import OutcomeRows

EVENT_TIME = datetime(2025, 1, 1, 10, 30)
SECOND = EVENT_TIME.replace(tzinfo=UTC).timestamp()


def test_a_window_counts_ratios_and_shares(tmp_path: Path) -> None:
    rows = OutcomeRows()
    data = rows.write_table(tmp_path / "data", [
        {**row, "event_time": EVENT_TIME} for row in
        [rows.drafted(3, 2), rows.drafted(3, 1), rows.skipped(3, accepted=1), rows.k_zero("no_proposal")]])
    con = connect(data)
    try:
        got = window_metrics(con, SECOND - 1, SECOND + 1, positions=3)
        assert {k: got[k] for k in ("num_drafts", "num_draft_tokens", "num_accepted_tokens", "vllm_num_drafts",
                                    "vllm_num_draft_tokens", "vllm_num_accepted_tokens", "request_steps")} == {
            "num_drafts": 2, "num_draft_tokens": 6, "num_accepted_tokens": 3, "vllm_num_drafts": 3,
            "vllm_num_draft_tokens": 9, "vllm_num_accepted_tokens": 4, "request_steps": 4}
        assert (got["acceptance_rate"], got["mean_acceptance_length"]) == (0.5, 2.5)
        assert (got["skip_share"], got["k_zero_share"]) == (0.25, 0.25)
        assert got["vllm_per_pos"] == [3, 1, 0]
        assert got["kinds"] == {"drafted": 2, "k_zero:no_proposal": 1, "skipped_for_length": 1}
        assert reproduces(got, {"num_drafts": 3, "num_draft_tokens": 9, "num_accepted_tokens": 4,
                                "num_accepted_tokens_per_pos": [3, 1, 0]})
        assert not reproduces(got, {"num_drafts": 3, "num_draft_tokens": 9, "num_accepted_tokens": 4,
                                    "num_accepted_tokens_per_pos": [3, 1, 1]})
        assert ratios(con, 3, 9, 4) == (pytest.approx(4 / 9), pytest.approx(1 + 4 / 3))
        empty = window_metrics(con, SECOND + 10, SECOND + 20, positions=3)
        assert (empty["request_steps"], empty["acceptance_rate"], empty["skip_share"], empty["k_zero_share"]) == (
            0, None, None, None)
        assert ratios(con, 0, 0, 0) == (None, None)
    finally:
        con.close()


def test_a_window_tells_collateral_skips_from_own_ones(tmp_path: Path) -> None:
    """K = 3, drafter 96: a request of length 93 fits alone, one of 94 does not. r1's own rate where it
    drafted (2 of 3) estimates what its 3 lost placeholders would have accepted."""
    rows = OutcomeRows()
    data = rows.write_table(tmp_path / "data", [
        {**row, "event_time": EVENT_TIME} for row in
        [rows.drafted(3, 2, request_id="r1", seq_len=20), rows.skipped(3, request_id="r1", seq_len=93),
         rows.skipped(3, request_id="r2", seq_len=94), rows.skipped(3, request_id="r3")]])
    con = connect(data)
    try:
        got = window_collateral(con, SECOND - 1, SECOND + 1)
        assert got == {"skips": 3, "collateral_skips": 1, "collateral_share": pytest.approx(1 / 3),
                       "lost_draft_tokens": 3, "estimated_accepted_tokens": pytest.approx(2.0)}
        assert window_collateral(con, SECOND + 10, SECOND + 20) == {
            "skips": 0, "collateral_skips": 0, "collateral_share": None, "lost_draft_tokens": 0,
            "estimated_accepted_tokens": None}
    finally:
        con.close()
