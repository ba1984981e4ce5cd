"""A bounded storm of faults on a consumer group (benchmarks/bench_chaos.py): ingesters SIGKILLed,
SIGSTOPped, SIGTERMed, scaled up and down, the broker paused, under realtime load; then quiet. Every
row of every engine is stored exactly once soon after the load ends."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.bench_chaos import run_storm

#: Seeds whose storm once stalled the group for good (a LeaveGroup from the leader of a forming group
#: left the broker's group without one: BENCHMARKS.md, bench_chaos), with the storm's length.
REGRESSIONS = [(4, 45)]
#: How long after the load ends every row must be stored.
CATCH_UP_S = 60


@pytest.mark.parametrize(("seed", "storm_s"), REGRESSIONS)
def test_after_a_storm_every_row_of_every_engine_is_stored_once(seed: int, storm_s: int, tmp_path: Path) -> None:
    result = run_storm(seed, storm_s, engines=12, deadline_s=CATCH_UP_S, work=tmp_path)
    assert sum(result["faults"].values()) >= storm_s / 5, result  # a storm, not a breeze
    assert result["engines_short"] == {} and result["stored_rows"] == result["truth_rows"] > 0, result
    assert result["duplicate_rows"] == 0, result
    assert result["caught_up"] and result["catch_up_s"] <= CATCH_UP_S, result
    assert set(result["ingester_exits"]) <= {0, -9, -15}, result  # stopped or killed, never an error exit
    assert result["producer_exits"] == [0, 0, 0], result
