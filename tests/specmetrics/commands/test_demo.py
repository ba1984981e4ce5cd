"""``specmetrics demo``: the scenarios, vLLM-reported next to the truth."""

from __future__ import annotations

from pathlib import Path

import pytest

from specmetrics.cli import main
from specmetrics.queries import connect, run_query


def test_demo_shows_the_scenarios_side_by_side(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    assert main(["demo", "--workdir", str(workdir), "--rows", "4000", "--loadgen"]) == 0
    out, err = capsys.readouterr()
    assert "--loadgen was given: the events come from the load generator" in out
    assert "demo events:" in err and "ingest:" in err
    # readable in a terminal of 120 columns, run in the default workdir
    assert max(map(len, out.replace(str(workdir), "specmetrics-demo").splitlines())) <= 120
    side_by_side, _, rest = out.partition("Why they differ")
    shares, _, collateral = rest.partition("Skips for length, by each request's own length")
    lines = {line.split()[0]: line.split() for line in side_by_side.split("mean acceptance length")[1].splitlines()
             if "-0/dp0" in line}
    assert list(lines) == ["fits-0/dp0", "too-long-0/dp0", "crossing-0/dp0", "grammar-0/dp0", "ngram-0/dp0"]
    share = {line.split()[0]: line.split()[1:] for line in shares.splitlines() if "-0/dp0" in line}
    assert share["too-long-0/dp0"] == ["1.0000", "0.0000", "0.0000"] and float(share["ngram-0/dp0"][1]) > 0.5
    # Who paid for the long requests: in crossing, nearly every skip is a request that fit the drafter
    # alone (its drafts lost: 3 placeholder slots each, all would have been accepted); in too-long, none.
    skips = {line.split()[0]: line.split()[1:] for line in collateral.splitlines() if "-0/dp0" in line}
    assert list(skips) == ["too-long-0/dp0", "crossing-0/dp0"]
    assert skips["too-long-0/dp0"] == ["4032", "0", "0.0000", "0", "NULL"]
    crossing_skips, crossing_collateral, _, lost, estimated = skips["crossing-0/dp0"]
    assert int(crossing_collateral) > 0.9 * int(crossing_skips) and int(lost) == 3 * int(crossing_collateral)
    assert float(estimated) == int(lost)
    # too-long: vLLM reports drafts at 0.00 % (MAL 1.00); the truth is no drafts at all.
    assert lines["too-long-0/dp0"][2:7] == ["0.0000", "1.0000", "0", "NULL", "NULL"]
    con = connect(workdir / "data")
    truth = {r["engine_id"]: r for r in run_query(con, "SELECT * FROM acceptance").to_pylist()}
    vllm = {r["engine_id"]: r for r in run_query(con, "SELECT * FROM acceptance_vllm").to_pylist()}
    con.close()
    assert truth["fits-0/dp0"]["acceptance_rate"] == vllm["fits-0/dp0"]["acceptance_rate"] == 1.0
    assert truth["crossing-0/dp0"]["acceptance_rate"] == 1.0 > vllm["crossing-0/dp0"]["acceptance_rate"]
    assert truth["too-long-0/dp0"]["num_drafts"] == 0 < vllm["too-long-0/dp0"]["num_drafts"]
    assert vllm["grammar-0/dp0"]["num_drafts"] > truth["grammar-0/dp0"]["num_drafts"]
    # A second run starts from scratch instead of duplicating the events.
    assert main(["demo", "--workdir", str(workdir), "--rows", "4000", "--loadgen"]) == 0
    con = connect(workdir / "data")
    assert run_query(con, "SELECT count(*) AS n FROM request_steps").to_pylist() == [{"n": 5 * 4032}]
    con.close()


def test_demo_refuses_a_folder_it_did_not_create(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("keep me")
    assert main(["demo", "--workdir", str(tmp_path), "--loadgen"]) == 2
    assert "was not created by the demo" in capsys.readouterr().err
    assert (tmp_path / "precious.txt").read_text() == "keep me"
