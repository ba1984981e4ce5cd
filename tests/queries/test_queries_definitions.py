"""Every number comes from the macros of queries/sql/definitions: redefining one (a draft, a skip,
the rate over drafts, the window) in a connection moves the views, the report (from the raw rows
and from the stored rollups) and the time windows together, and no other SQL or Python file
spells a definition out."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from specmetrics.cli import main
from specmetrics.queries import connect, run_query
from specmetrics.reports import Window, collect
from specmetrics.windows import window_metrics

ROOT = Path(__file__).resolve().parents[2]
EVENT_TIME = datetime(2025, 1, 1, 10, 30)
#: (num_drafts, num_accepted_tokens) as each consumer computes them.
VIEWS = {
    "request_steps": "SELECT count(*) FILTER (WHERE is_draft), coalesce(sum(accepted) FILTER (WHERE is_draft), 0) "
                     "FROM request_steps",
    "acceptance": "SELECT coalesce(sum(num_drafts), 0), coalesce(sum(num_accepted_tokens), 0) FROM acceptance",
    "acceptance_diff": "SELECT coalesce(sum(num_drafts), 0), coalesce(sum(num_accepted_tokens), 0) "
                       "FROM acceptance_diff",
    "acceptance_timeline": "SELECT coalesce(sum(num_drafts), 0), coalesce(sum(num_accepted_tokens), 0) "
                           "FROM acceptance_timeline()",
    "skips_by_context": "SELECT coalesce(sum(num_drafts), 0), coalesce(sum(num_accepted_tokens), 0) "
                        "FROM skips_by_context",
    "request_acceptance": "SELECT coalesce(sum(num_drafts), 0), coalesce(sum(num_accepted_tokens), 0) "
                          "FROM request_acceptance",
    "acceptance_per_position": "SELECT coalesce(sum(num_drafts) FILTER (WHERE position = 0), 0), "
                               "coalesce(sum(num_accepted), 0) FROM acceptance_per_position",
}


def every_consumer(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[int, int]]:
    numbers = {name: tuple(int(v) for v in run_query(con, sql).to_pylist()[0].values()) for name, sql in VIEWS.items()}
    for name, stored in (("report", False), ("report from rollups", True)):
        headline = collect(con, Window(None, None), stored_rollups=stored).headline
        numbers[name] = (int(headline["num_drafts"]), int(headline["num_accepted_tokens"]))
    second = EVENT_TIME.replace(tzinfo=UTC).timestamp()
    window = window_metrics(con, second - 1, second + 1, positions=3)
    numbers["windows"] = (window["num_drafts"], window["num_accepted_tokens"])
    return numbers


def tree(tmp_path: Path, outcomes: Any) -> Path:
    """Two drafted request-steps, one grammar_invalid with a valid draft (a corrected draft), one
    whose drafts were all invalid (not one), a skipped and a K = 0 request-step; rollups built."""
    rows = [outcomes.drafted(3, 2), outcomes.drafted(3, 1), outcomes.grammar_async(2, 1, 1),
            outcomes.grammar_async(0, 3, 0), outcomes.skipped(3), outcomes.k_zero("no_proposal")]
    data = outcomes.write_table(tmp_path / "data", [{**row, "event_time": EVENT_TIME} for row in rows])
    assert main(["rollup", "--data", str(data)]) == 0
    return data


def test_redefining_is_draft_moves_the_views_the_report_the_rollups_and_the_windows(
        tmp_path: Path, outcomes: Any) -> None:
    con = connect(tree(tmp_path, outcomes))
    try:
        names = [*VIEWS, "report", "report from rollups", "windows"]
        assert every_consumer(con) == dict.fromkeys(names, (3, 4))
        con.execute("CREATE OR REPLACE MACRO is_draft(kind, k_valid) AS kind = 'drafted'")  # grammar_invalid out
        assert every_consumer(con) == dict.fromkeys(names, (2, 3))
    finally:
        con.close()


def test_redefining_the_time_window_moves_every_windowed_number(tmp_path: Path, outcomes: Any) -> None:
    con = connect(tree(tmp_path, outcomes))
    try:
        con.execute("CREATE OR REPLACE MACRO in_window(event_time, dt, hour, t0, t1) AS "
                    "event_time < TIMESTAMP '2000-01-01'")  # no row is in any window
        assert every_consumer(con) == {**dict.fromkeys([*VIEWS, "report", "report from rollups", "windows"], (0, 0)),
                                       "request_steps": (3, 4)}  # the view itself has no window
    finally:
        con.close()


#: Spelled-out definitions: of a draft, of a skip, of a draft count, of a rate over drafts, of the
#: window bounds.
FORMULAS = re.compile(r"kind\s*=\s*'drafted'|kind\s*=\s*'skipped_for_length'|k_sched\s*>\s*0"
                      r"|AS\s+TIMESTAMPTZ|event_time\s+BETWEEN"
                      r"|FILTER\s*\(\s*WHERE\s+(?:\w+\.)?is_(?:vllm_)?draft\b"
                      r"|/\s*nullif\(\s*(?:vllm_)?num_(?:drafts|reached|draft_tokens)\b", re.IGNORECASE)


#: The packages that read or count stored request-steps.
READERS = ("ingest", "queries", "reports", "monitoring", "specmetrics")


def code_files() -> list[Path]:
    return [path for folder in READERS for path in sorted((ROOT / folder).rglob("*"))
            if path.suffix in (".sql", ".py") and "definitions" not in path.parts]


def code(path: Path) -> str:
    """SQL without its comments and COMMENT ON statements (they describe the definitions); Python whole."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".sql":
        text = re.sub(r"--[^\n]*|COMMENT ON [^;]*;", " ", text)
    return text


def test_no_file_but_the_definitions_spells_a_definition_out() -> None:
    assert FORMULAS.search(code(ROOT / "queries/sql/definitions/drafts.sql"))  # the check finds what it looks for
    assert FORMULAS.search(code(ROOT / "queries/sql/definitions/skips.sql"))
    for spelled_out in ("num_accepted / nullif(num_drafts, 0)", "x\n  / NULLIF(vllm_num_drafts(k_sched), 0)",
                        "count(*) FILTER (WHERE kind = 'skipped_for_length')", "WHERE event_time BETWEEN ? AND ?"):
        assert FORMULAS.search(spelled_out), spelled_out
    spelled = {str(path.relative_to(ROOT)): FORMULAS.findall(code(path)) for path in code_files()}
    assert {path: found for path, found in spelled.items() if found} == {}


def skips_and_rates(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """The skip share and the rate over drafts at position 0, as each consumer computes them."""
    numbers: dict[str, Any] = {
        "skips_by_context": run_query(con, "SELECT skip_share FROM skips_by_context").to_pylist()[0]["skip_share"],
        "acceptance_per_position": run_query(
            con, "SELECT rate_over_drafts FROM acceptance_per_position WHERE position = 0").to_pylist()[0][
            "rate_over_drafts"],
        "acceptance_vllm_per_position": run_query(
            con, "SELECT acceptance_rate FROM acceptance_vllm_per_position WHERE position = 0").to_pylist()[0][
            "acceptance_rate"],
    }
    for name, stored in (("report", False), ("report from rollups", True)):
        data = collect(con, Window(None, None), stored_rollups=stored)
        numbers[f"{name}: skip share"] = data.context[0]["skip_share"]
        numbers[f"{name}: rate over drafts"] = data.positions[0]["rate_over_drafts"]
        numbers[f"{name}: vLLM rate over drafts"] = data.positions[0]["vllm_rate_over_drafts"]
    second = EVENT_TIME.replace(tzinfo=UTC).timestamp()
    numbers["windows: skip share"] = window_metrics(con, second - 1, second + 1, positions=3)["skip_share"]
    return numbers


def test_redefining_a_skip_and_the_rate_over_drafts_moves_the_views_the_report_and_the_windows(
        tmp_path: Path, outcomes: Any) -> None:
    con = connect(tree(tmp_path, outcomes))
    try:
        skip_shares = ["skips_by_context", "report: skip share", "report from rollups: skip share",
                       "windows: skip share"]
        rates = [name for name in skips_and_rates(con) if name not in skip_shares]
        vllm_rates = ["acceptance_vllm_per_position", "report: vLLM rate over drafts",
                      "report from rollups: vLLM rate over drafts"]
        rates = [name for name in rates if name not in vllm_rates]
        # 1 skipped of 6; at position 0, 3 of 3 corrected drafts and 3 of 5 vLLM drafts accepted
        assert skips_and_rates(con) == {**dict.fromkeys(skip_shares, 1 / 6), **dict.fromkeys(rates, 1.0),
                                        **dict.fromkeys(vllm_rates, 3 / 5)}
        con.execute("CREATE OR REPLACE MACRO is_skipped(kind) AS kind IN ('skipped_for_length', 'k_zero')")
        con.execute("CREATE OR REPLACE MACRO rate_over_drafts(accepted_at, drafts) AS accepted_at / (drafts + 1)")
        assert skips_and_rates(con) == {**dict.fromkeys(skip_shares, 2 / 6), **dict.fromkeys(rates, 3 / 4),
                                        **dict.fromkeys(vllm_rates, 3 / 6)}
    finally:
        con.close()
