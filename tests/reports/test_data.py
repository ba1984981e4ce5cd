"""The report's numbers, by hand, on a small tree; windows and the automatic bucket width."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from specmetrics.queries import connect, run_query
from specmetrics.reports import Window, collect
from specmetrics.reports.data import MAX_BUCKETS, _pick_bucket
from tests.support.reports import T


def test_headline_pools_all_groups(report_tree: Path) -> None:
    con = connect(report_tree)
    try:
        data = collect(con, Window(None, None))
    finally:
        con.close()
    # corrected drafts: (3,3), (3,1), (2,2); vLLM adds 2 skipped and 1 all-invalid
    assert data.headline == {
        "num_drafts": 3, "vllm_num_drafts": 6, "num_draft_tokens": 8, "vllm_num_draft_tokens": 14,
        "num_accepted_tokens": 6, "vllm_num_accepted_tokens": 6,
        "acceptance_rate": pytest.approx(6 / 8), "vllm_acceptance_rate": pytest.approx(6 / 14),
        "mean_acceptance_length": pytest.approx(3.0), "vllm_mean_acceptance_length": pytest.approx(2.0),
    }
    assert data.request_steps == 9
    assert (data.first_event, data.last_event) == (T, T.replace(minute=5))
    assert [(r["kind"], r["request_steps"]) for r in data.shares] == [
        ("drafted", 3), ("grammar_invalid", 1), ("k_zero", 3), ("skipped_for_length", 2)]
    assert data.bucket == timedelta(seconds=5)  # 5 minutes: at most MAX_BUCKETS buckets of 5 s
    # minute 3: the all-invalid draft counts as a vLLM draft, but with no draft token
    assert [(r["bucket_start"].minute, r["bucket_start"].second, r["acceptance_rate"], r["vllm_acceptance_rate"])
            for r in data.timeline] == [
        (0, 0, 1.0, 1.0), (1, 0, pytest.approx(1 / 3), pytest.approx(1 / 3)), (2, 0, None, 0.0), (2, 30, None, 0.0),
        (3, 0, None, None), (4, 0, None, None), (5, 0, 1.0, 1.0)]
    # position 0: the 3 drafts all accept >= 1 (vLLM: 3 of 6); position 2: only (3,3) accepts, and only the two
    # drafts of 3 tokens reach it
    assert [(r["position"], r["rate_over_drafts"], r["rate_conditional"], r["vllm_rate_over_drafts"])
            for r in data.positions] == [
        (0, 1.0, 1.0, 0.5), (1, pytest.approx(2 / 3), pytest.approx(2 / 3), pytest.approx(2 / 6)),
        (2, pytest.approx(1 / 3), pytest.approx(1 / 2), pytest.approx(1 / 6))]
    assert [(r["context_start"], r["request_steps"], r["skip_share"]) for r in data.context] == [
        (0, 6, 0.0), (256, 1, 0.0), (512, 1, 1.0), (768, 1, 1.0)]
    assert [(r["k_zero_reason"], r["request_steps"]) for r in data.k_zero] == [("no_proposal", 2), ("length_trim", 1)]
    assert [(g["engine_id"], g["extra_vllm_drafts"]) for g in data.groups] == [("a/dp0", 3), ("b/dp1", 0)]


def test_window_bounds_are_applied(report_tree: Path) -> None:
    con = connect(report_tree)
    try:
        data = collect(con, Window(T.replace(minute=2), T.replace(minute=4)))
        empty = collect(con, Window(datetime(2030, 1, 1), None))
    finally:
        con.close()
    assert data.request_steps == 4  # two skips, the all-invalid draft, one K = 0
    assert (data.headline["num_drafts"], data.headline["vllm_num_drafts"]) == (0, 3)
    assert data.headline["acceptance_rate"] is None
    assert empty.empty and empty.timeline == [] and empty.headline["num_drafts"] == 0


@pytest.mark.parametrize(("span", "width"), [
    (timedelta(seconds=20), timedelta(seconds=1)),
    (timedelta(minutes=5), timedelta(seconds=5)),
    (timedelta(minutes=9), timedelta(seconds=5)),
    (timedelta(minutes=10), timedelta(minutes=1)),
    (timedelta(minutes=30), timedelta(minutes=1)),
    (timedelta(hours=3), timedelta(minutes=5)),
    (timedelta(days=2), timedelta(hours=1)),
    (timedelta(days=400), timedelta(days=7)),
])
def test_bucket_width_keeps_the_timeline_short(span: timedelta, width: timedelta) -> None:
    assert _pick_bucket(T, T + span) == width
    assert span / width < MAX_BUCKETS or width == timedelta(days=7)


def test_bucket_can_be_given(report_tree: Path) -> None:
    con = connect(report_tree)
    try:
        data: Any = collect(con, Window(None, None), bucket=timedelta(hours=1))
    finally:
        con.close()
    assert [(r["bucket_start"], r["request_steps"]) for r in data.timeline] == [(T, 9)]


def test_the_timeline_chart_breaks_over_an_outage(tmp_path: Path, outcomes: Any) -> None:
    from specmetrics.reports.render import charts

    minutes = (0, 1, 5, 6)  # nothing in minutes 2-4
    root = outcomes.write_table(tmp_path / "gap", [outcomes.drafted(3, 1, event_time=T.replace(minute=m))
                                                  for m in minutes])
    con = connect(root)
    try:
        data = collect(con, Window(None, None), bucket=timedelta(minutes=1))
    finally:
        con.close()
    [timeline] = [c.svg for c in charts(data) if c.name == "timeline"]
    assert timeline.count('<polyline data-series="corrected"') == 2  # 0-1 and 5-6, not one line across the gap
    assert timeline.count('<circle') == 2 * len(minutes)


def test_each_quantity_has_one_colour_in_every_chart(report_tree: Path) -> None:
    from specmetrics.reports.render import charts

    con = connect(report_tree)
    try:
        data = collect(con, Window(None, None))
    finally:
        con.close()
    colours: dict[str, set[str]] = {}
    for chart in charts(data):
        for name, colour in re.findall(r'<polyline data-series="([^"]+)" fill="none" stroke="([^"]+)"', chart.svg):
            quantity = "vLLM" if "vLLM" in name else "corrected" if name.endswith("corrected") or \
                name in ("corrected", "corrected, over all drafts") else name
            colours.setdefault(quantity, set()).add(colour)
    assert {"vLLM", "corrected", "skip share", "corrected, over drafts reaching it"} == set(colours)
    assert all(len(found) == 1 for found in colours.values()), colours
    assert len({next(iter(found)) for found in colours.values()}) == 4  # and no two quantities share one


def test_both_formats_render_the_same_sections_in_the_same_order(report_tree: Path) -> None:
    from specmetrics.reports.render import html, markdown, sections

    con = connect(report_tree)
    try:
        data = collect(con, Window(None, None))
    finally:
        con.close()
    titles = [section.title for section in sections(data)]
    assert titles[:4] == ["Headline: corrected vs vLLM-reported", "What happened to speculation", "Charts",
                          "Per engine and model"] and len(titles) > 4
    assert re.findall(r"^## (.+)$", markdown(data, T, {}), re.M) == titles
    assert re.findall(r"<h2>(.+?)</h2>", html(data, T, [])) == titles


def test_engines_whose_context_vllm_lowered_get_a_section_in_both_formats(tmp_path: Path, outcomes: Any) -> None:
    from specmetrics.reports.render import html, markdown

    capped = {"engine_instance": "v2", "vllm_version": "0.34.0", "max_model_len": 2048, "context_cap_from": 131072,
              "drafter_max_len": 2048}
    root = outcomes.write_table(tmp_path / "caps", [
        outcomes.drafted(3, 1, event_time=T, **capped),
        outcomes.drafted(3, 2, event_time=T.replace(minute=9), **capped),  # outside the window below
        outcomes.drafted(3, 1, event_time=T, engine_instance="v1", max_model_len=8192),  # served in full
    ])
    con = connect(root)
    try:
        data = collect(con, Window(None, T.replace(minute=5)))
        before = collect(con, Window(None, T))
    finally:
        con.close()
    assert [(r["engine_id"], r["context_cap_from"], r["max_model_len"], r["summary"]) for r in data.context_caps] == [
        ("v2/dp0", 131072, 2048, "context capped from 131,072 to 2,048 by the drafter")]
    assert before.context_caps == []
    text = markdown(data, T, {})
    assert "## Context capped by the drafter" in text
    assert "| v2/dp0 | tiny-llama | 0.34.0 | draft\\_model | 131,072 | 2,048 | 2,048 |" in text  # _ escaped
    page = html(data, T, [])
    assert '<section id="context-caps">' in page and "131,072" in page
    assert "Context capped" not in markdown(before, T, {}) and "context-caps" not in html(before, T, [])




def test_a_model_run_in_several_configurations_gets_them_ranked_in_both_formats(tmp_path: Path, outcomes: Any) -> None:
    from specmetrics.reports.render import html, markdown

    one_each = [outcomes.drafted(3, 3, event_time=T, num_spec_tokens=3) for _ in range(2)]  # 4 tokens a verification
    one_each.append(outcomes.drafted(1, 1, event_time=T, model="alone", num_spec_tokens=1))
    several = [*one_each, outcomes.drafted(5, 1, event_time=T, engine_instance="b", num_spec_tokens=5)]  # 2 tokens
    found = []
    for name, rows in (("several", several), ("one-each", one_each)):
        con = connect(outcomes.write_table(tmp_path / name, rows))
        try:
            found.append(collect(con, Window(None, None)))
        finally:
            con.close()
    data, single = found
    assert [(r["model"], r["num_spec_tokens"], r["tokens_per_verify_step"], r["rank_in_model"])
            for r in data.configurations] == [("tiny-llama", 3, 4.0, 1), ("tiny-llama", 5, 2.0, 2)]
    text = markdown(data, T, {})
    assert "## Configurations compared" in text and "| tiny-llama | draft\\_model | 3 | 1 | 4.000 |" in text
    assert '<section id="configurations">' in html(data, T, [])
    assert single.configurations == []  # no model ran in more than one configuration: no section
    assert "Configurations compared" not in markdown(single, T, {})
    assert '<section id="configurations">' not in html(single, T, [])


def test_the_longest_context_the_contract_allows_gets_a_bucket_ending_past_it(tmp_path: Path, outcomes: Any) -> None:
    """batch_max_seq_len 2**31 - 1: its 256-token bucket ends at 2**31, past INTEGER (the report
    once failed with an overflow there)."""
    con = connect(outcomes.write_table(tmp_path / "long", [outcomes.drafted(3, 1, event_time=T,
                                                                           batch_max_seq_len=2**31 - 1)]))
    try:
        data = collect(con, Window(None, None))
        view = [tuple(r.values()) for r in run_query(
            con, "SELECT context_start, context_end FROM skips_by_context").to_pylist()]
    finally:
        con.close()
    assert [(r["context_start"], r["context_end"]) for r in data.context] == [(2**31 - 256, 2**31)] == view


def test_each_configuration_is_held_against_its_published_baseline_or_told_none_matches(
        tmp_path: Path, outcomes: Any) -> None:
    from specmetrics.reports.render import html, markdown

    qwen = {"event_time": T, "model": "Qwen/Qwen3-8B", "method": "eagle3", "num_spec_tokens": 3}
    rows = [outcomes.drafted(3, 3, **qwen), outcomes.drafted(3, 1, **qwen),
            outcomes.drafted(2, 2, event_time=T, engine_instance="b", num_spec_tokens=2)]
    con = connect(outcomes.write_table(tmp_path / "data", rows))
    try:
        data = collect(con, Window(None, None))
    finally:
        con.close()
    assert [(r["model"], r["position"], r["rate"], r["baseline_rate"]) for r in data.baselines] == [
        ("Qwen/Qwen3-8B", 0, 1.0, 0.6541), ("Qwen/Qwen3-8B", 1, 0.5, 0.3993), ("Qwen/Qwen3-8B", 2, 0.5, 0.2020)]
    assert [tuple(r.values()) for r in data.measured] == [("Qwen/Qwen3-8B", "eagle3", 3),
                                                          ("tiny-llama", "draft_model", 2)]
    text = markdown(data, T, {})
    assert "## Against published baselines" in text
    assert "| Qwen/Qwen3-8B | eagle3 | 3 | 1 | 50.00% | 50.00% | 39.93% | 10.07% | " \
           "RedHatAI/Qwen3-8B-speculator.eagle3 |" in text
    assert "No published baseline matches tiny-llama (draft\\_model, K = 2). Baselines exist for: " \
           "Qwen/Qwen3-8B (eagle3, K = 3), Qwen/Qwen3-VL-30B-A3B-Instruct-FP8 (eagle3, K = 3), " \
           "meta-llama/Llama-3.1-8B-Instruct (eagle3, K = 3), openai/gpt-oss-20b (eagle3, K = 3)." in text
    page = html(data, T, [])
    assert '<table id="baselines-table">' in page and 'data-key="Qwen/Qwen3-8B/eagle3/3/2"' in page
    assert "No published baseline matches tiny-llama (draft_model, K = 2)." in page


def test_verification_that_held_no_draft_gets_a_section_in_both_formats(report_tree: Path) -> None:
    from specmetrics.reports.render import html, markdown

    con = connect(report_tree)
    try:
        data = collect(con, Window(None, None))
    finally:
        con.close()
    # Engine a verified 3 + 3 drafts, 2 x 3 placeholders and 3 pads of 15 slots; engine b nothing wasted.
    assert [(r["engine_id"], r["verified_slots"], r["placeholder_slots"], r["pad_slots"], r["wasted_share"])
            for r in data.wasted] == [("a/dp0", 15, 6, 3, pytest.approx(9 / 15))]
    assert "## Verification that held no draft" in markdown(data, T, {})
    assert "| a/dp0 | tiny-llama | draft\\_model | 3 | 15 | 6 | 3 | 60.00% |" in markdown(data, T, {})
    assert '<table id="wasted-table">' in html(data, T, [])


def test_steps_with_vllms_numbers_only_get_a_section_and_a_window_of_only_them_is_not_empty(
        tmp_path: Path, outcomes: Any) -> None:
    from specmetrics.reports.render import charts, html, markdown

    blind = {"engine_instance": "blind", "vllm_version": "0.35.0"}
    root = outcomes.write_table(tmp_path / "only", [
        outcomes.drafted(3, 1, event_time=T),
        outcomes.vllm_only("step_hook_not_installed", 2, 6, 3, event_time=T.replace(minute=20), **blind),
        outcomes.vllm_only("step_hook_not_installed", 1, 3, 0, event_time=T.replace(minute=21), **blind),
    ])
    con = connect(root)
    try:
        both, only = collect(con, Window(None, None)), collect(con, Window(T.replace(minute=10), None))
    finally:
        con.close()
    assert both.request_steps == 1 and both.headline["num_drafts"] == 1  # the blind steps count in no metric
    assert [(r["engine_id"], r["vllm_only"], r["steps"], r["num_drafts"], r["acceptance_rate"]) for r in both.vllm_only
            ] == [("blind/dp0", "step_hook_not_installed", 2, 3, 3 / 9)]
    text = markdown(both, T, {})
    assert "## vLLM's numbers only: steps the plugin did not observe" in text
    assert ("| blind/dp0 | 0.35.0 | tiny-llama | draft\\_model | step\\_hook\\_not\\_installed | 2 | 3 | 33.33% |"
            in text)
    assert "Besides them, 2 steps with vLLM's numbers only" in text
    # a window of vLLM-only steps: their section, no "nothing here", no chart of metrics that do not exist
    assert only.request_steps == 0 and not only.empty and charts(only) == []
    text = markdown(only, T, {})
    assert "No request-steps in this window" not in text and "## vLLM's numbers only" in text
    assert "## Headline" not in text and "No request-step the plugin observed; 2 steps" in text
    assert '<section id="vllm-only">' in html(only, T, []) and "<h2>Headline" not in html(only, T, [])
