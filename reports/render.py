"""A report's data as Markdown or as one self-contained HTML page (charts inline as SVG).

Both formats show the same things: the window, the headline (corrected vs vLLM-reported, and
whether the vLLM-reported numbers equal vLLM's own counters: the audit, with a section where they
do not), what
happened to speculation (outcome kinds), acceptance over time, per-position rates with both
denominators, skip share by context length, K = 0 reasons, the per-engine/model table, where a
model ran in more than one configuration, the configurations ranked by tokens per verification, the
draft slots verified that held no draft (where there are some), the skips for length of requests
that fit the drafter alone (where there are some), requests by their own acceptance rate (a chart)
and those far from their group (where there are some), and each configuration's per-position rates
against the published baseline of its model, method and K (or that none matches).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape
from typing import Any

from specmetrics.reports.charts import CORRECTED, CORRECTED_REACHING, SKIP_SHARE, VLLM, Series, bar_chart, line_chart
from specmetrics.reports.data import OUTLIER_MARGIN, OUTLIER_MIN_DRAFTS, ReportData, Row, bucket_text

#: (key in ReportData.headline without the vllm_ prefix, label, formatter name)
HEADLINE_ROWS: tuple[tuple[str, str, str], ...] = (
    ("acceptance_rate", "Acceptance rate", "pct"),
    ("mean_acceptance_length", "Mean acceptance length", "ratio"),
    ("num_drafts", "Drafts", "count"),
    ("num_draft_tokens", "Draft tokens", "count"),
    ("num_accepted_tokens", "Accepted tokens", "count"),
)
GROUP_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("engine_id", "engine", "text"), ("model", "model", "text"), ("method", "method", "text"),
    ("num_spec_tokens", "K", "count"), ("num_drafts", "drafts", "count"), ("vllm_num_drafts", "vLLM drafts", "count"),
    ("acceptance_rate", "acceptance", "pct"), ("vllm_acceptance_rate", "vLLM acceptance", "pct"),
    ("acceptance_rate_diff", "difference", "pct"),
    ("mean_acceptance_length", "mean length", "ratio"), ("vllm_mean_acceptance_length", "vLLM mean length", "ratio"),
)
CAP_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("engine_id", "engine", "text"), ("model", "model", "text"), ("vllm_version", "vLLM", "text"),
    ("method", "method", "text"), ("context_cap_from", "context configured", "count"),
    ("max_model_len", "context served", "count"), ("drafter_max_len", "drafter limit", "count"),
)
VLLM_ONLY_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("engine_id", "engine", "text"), ("vllm_version", "vLLM", "text"), ("model", "model", "text"),
    ("method", "method", "text"), ("vllm_only", "why", "text"), ("steps", "steps", "count"),
    ("num_drafts", "vLLM drafts", "count"), ("acceptance_rate", "vLLM-reported acceptance", "pct"),
    ("mean_acceptance_length", "vLLM-reported acceptance length", "ratio"),
)
AUDIT_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("engine_id", "engine", "text"), ("vllm_version", "vLLM", "text"), ("model", "model", "text"),
    ("method", "method", "text"), ("steps_compared", "steps checked", "count"),
    ("steps_differing", "steps that differ", "count"), ("first_differing_step", "first", "count"),
    ("last_differing_step", "last", "count"), ("num_drafts_difference", "drafts: plugin - vLLM", "count"),
    ("num_draft_tokens_difference", "draft tokens: plugin - vLLM", "count"),
    ("num_accepted_tokens_difference", "accepted tokens: plugin - vLLM", "count"),
)
AUDIT_NOTE = ("At these engines' steps the numbers shown as vLLM-reported, which the plugin rebuilds from the "
              "outcomes, differ from the counters vLLM itself computed: this vLLM release counts differently from "
              "the plugin's model of it, so the corrected metrics of these engines are suspect too. The view "
              "vllm_audit_steps lists the steps, vllm_audit the difference per draft position.")
CONFIG_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("model", "model", "text"), ("method", "method", "text"), ("num_spec_tokens", "K", "count"),
    ("engines", "engines", "count"), ("tokens_per_verify_step", "tokens per verification", "ratio"),
    ("accepted_per_verified_slot", "accepted per verified slot", "ratio"), ("acceptance_rate", "acceptance", "pct"),
    ("rank_in_model", "rank", "count"),
)
CONFIG_NOTE = ("Each model's configurations over their engines, ranked by the tokens a request gets per "
               "verification. The acceptance rate falls as K rises, so ranking by it picks the wrong K.")
BASELINE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("model", "model", "text"), ("method", "method", "text"), ("num_spec_tokens", "K", "count"),
    ("position", "position", "count"), ("rate", "acceptance", "pct"), ("vllm_rate", "vLLM acceptance", "pct"),
    ("baseline_rate", "baseline", "pct"), ("difference", "difference", "pct"),
    ("baseline_drafter", "baseline drafter", "text"),
)
WASTED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("engine_id", "engine", "text"), ("model", "model", "text"), ("method", "method", "text"),
    ("num_spec_tokens", "K", "count"), ("verified_slots", "draft slots verified", "count"),
    ("placeholder_slots", "placeholders", "count"), ("pad_slots", "-1 pads", "count"),
    ("wasted_share", "share with no draft", "pct"),
)
WASTED_NOTE = ("Draft slots the target verified that held no draft: placeholders of steps skipped for length, and "
               "the -1 pads async scheduling puts in place of grammar-invalid drafts. vLLM counts them as rejected "
               "drafts; here they are verification work spent on nothing.")
COLLATERAL_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("engine_id", "engine", "text"), ("model", "model", "text"), ("method", "method", "text"),
    ("num_spec_tokens", "K", "count"), ("skips", "skips", "count"), ("collateral_skips", "collateral", "count"),
    ("unknown_skips", "length unknown", "count"), ("collateral_share", "collateral share", "pct"),
    ("lost_draft_tokens", "draft tokens lost", "count"),
    ("estimated_accepted_tokens", "tokens they would have accepted", "ratio"),
    ("acceptance_rate", "acceptance", "pct"), ("acceptance_rate_had_drafted", "acceptance had they drafted", "pct"),
)
COLLATERAL_NOTE = ("vLLM decides for the whole batch whether the drafter runs, from its longest sequence. A skip is "
                   "collateral when the request alone fit the drafter: a longer request in its batch turned drafting "
                   "off. What they would have accepted is estimated at each request's own acceptance rate where it "
                   "drafted (its group's where it never did).")
OUTLIER_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("engine_id", "engine", "text"), ("request_id", "request", "text"), ("direction", "direction", "text"),
    ("acceptance_rate", "acceptance", "pct"), ("group_acceptance_rate", "group acceptance", "pct"),
    ("num_drafts", "drafts", "count"), ("request_steps", "request-steps", "count"),
)
VLLM_ONLY_NOTE = ("The plugin saw none of these steps' outcomes, only vLLM's own counters: the scheduler hook was "
                  "off (step_hook_off, SPECMETRICS_STEP_HOOK=false), could not install on that vLLM release "
                  "(step_hook_not_installed) or stopped itself (step_hook_disabled). These are vLLM's numbers, bugs "
                  "included; no corrected metric exists for them, and every other section leaves them out.")
CAP_NOTE = ("vLLM lowered these engines' context to their drafter's at start-up (Model Runner V2 cannot skip "
            "drafting for longer sequences): requests longer than the served context are refused.")


def fmt(kind: str, value: Any) -> str:
    """A value as shown in the report; "–" for no value (e.g. a rate without drafts)."""
    if value is None:
        return "–"
    formats: dict[str, Callable[[Any], str]] = {
        "pct": lambda v: f"{v:.2%}", "ratio": lambda v: f"{v:.3f}", "count": lambda v: f"{v:,}", "text": str}
    return formats[kind](value)


@dataclass(frozen=True)
class Chart:
    """One chart of the report: a file-name stem and its SVG."""

    name: str
    svg: str


def charts(data: ReportData) -> list[Chart]:
    """The report's charts; none for a window without request-steps."""
    if not data.request_steps:
        return []
    out = []
    timeline = _every_bucket(data)
    times = [_time_label(start, data) for start in timeline]
    out.append(Chart("timeline", line_chart(
        "timeline", f"Acceptance rate over time ({bucket_text(data.bucket)} buckets)", times,
        [Series("corrected", CORRECTED, [r["acceptance_rate"] if r else None for r in timeline.values()]),
         Series("vLLM-reported", VLLM, [r["vllm_acceptance_rate"] if r else None for r in timeline.values()])])))
    positions = [f"position {r['position']}" for r in data.positions]
    out.append(Chart("positions", line_chart(
        "positions", "Acceptance by draft position", positions,
        [Series("corrected, over all drafts", CORRECTED, [r["rate_over_drafts"] for r in data.positions]),
         Series("corrected, over drafts reaching it", CORRECTED_REACHING,
                [r["rate_conditional"] for r in data.positions]),
         Series("vLLM-reported", VLLM, [r["vllm_rate_over_drafts"] for r in data.positions])])))
    contexts = [_context_label(r) for r in data.context]
    out.append(Chart("context", line_chart(
        "context", "Skipped for length, and acceptance, by context length", contexts,
        [Series("skip share", SKIP_SHARE, [r["skip_share"] for r in data.context]),
         Series("acceptance, corrected", CORRECTED, [r["acceptance_rate"] for r in data.context]),
         Series("acceptance, vLLM-reported", VLLM, [r["vllm_acceptance_rate"] for r in data.context])])))
    if any(r["requests"] for r in data.histogram):
        out.append(Chart("requests", bar_chart(
            "requests", "Requests by their own acceptance rate (share of requests with a draft token)",
            [f"{r['lower_rate']:.0%}–{r['upper_rate']:.0%}" for r in data.histogram],
            [r["share"] for r in data.histogram])))
    if data.k_zero:
        out.append(Chart("k_zero", bar_chart(
            "k_zero", "Why K = 0: share of K = 0 request-steps by reason",
            [r["k_zero_reason"] for r in data.k_zero], [r["share_of_k_zero"] for r in data.k_zero])))
    return out


#: The cells of a table row: (shown text, raw value: None for text), the raw value kept in the HTML.
Cells = Sequence[tuple[str, Any]]


@dataclass(frozen=True)
class Table:
    """A table of a section: its HTML id, header, and rows of (key, cells)."""

    id: str
    header: Sequence[str]
    rows: Sequence[tuple[str, Cells]]


@dataclass(frozen=True)
class Section:
    """One section of the report, shown alike by both formats: paragraphs, a table, the charts
    (the section that holds them), paragraphs after."""

    id: str
    title: str
    before: Sequence[str] = ()
    table: Table | None = None
    charts: bool = False
    after: Sequence[str] = ()


def _configuration(row: Row) -> str:
    return f"{row['model']}/{row['method']}/{row['num_spec_tokens']}"


def sections(data: ReportData) -> list[Section]:
    """The report's sections in order (none for an empty window): what both formats render."""
    if data.empty:
        return []
    only = [Section("vllm-only", "vLLM's numbers only: steps the plugin did not observe", [VLLM_ONLY_NOTE],
                    _rows_table("vllm-only-table", VLLM_ONLY_COLUMNS, data.vllm_only))] if data.vllm_only else []
    if not data.request_steps:
        return only
    h = data.headline
    note = _headline_note(data)
    out = [
        Section("headline", "Headline: corrected vs vLLM-reported", table=Table(
            "headline-table", ["metric", "corrected", "vLLM-reported"],
            [(key, [(label, None), (fmt(kind, h[key]), h[key]), (fmt(kind, h[f"vllm_{key}"]), h[f"vllm_{key}"])])
             for key, label, kind in HEADLINE_ROWS]), after=[*([note] if note else []), _audit_text(data)]),
        *([Section("audit", "vLLM counts differently from the plugin's model", [AUDIT_NOTE], _rows_table(
            "audit-table", AUDIT_COLUMNS, data.drift,
            lambda row: f"{row['engine_id']}/{row['vllm_version']}/{row['model']}/{row['method']}"))]
          if data.drift else []),
        Section("outcomes", "What happened to speculation", table=Table(
            "outcomes-table", ["outcome", "request-steps", "share"],
            [(r["kind"], [(r["kind"], None), (fmt("count", r["request_steps"]), r["request_steps"]),
                          (fmt("pct", r["share"]), r["share"])]) for r in data.shares])),
        *only,
        Section("charts", "Charts", charts=True),
        Section("groups", "Per engine and model", table=_rows_table("groups-table", GROUP_COLUMNS, data.groups)),
    ]
    if data.configurations:
        out.append(Section("configurations", "Configurations compared", [CONFIG_NOTE], _rows_table(
            "configurations-table", CONFIG_COLUMNS, data.configurations, _configuration)))
    if data.wasted:
        out.append(Section("wasted", "Verification that held no draft", [WASTED_NOTE],
                           _rows_table("wasted-table", WASTED_COLUMNS, data.wasted)))
    if data.collateral:
        out.append(Section("collateral", "Who paid for the long requests", [COLLATERAL_NOTE], _rows_table(
            "collateral-table", COLLATERAL_COLUMNS, data.collateral,
            lambda row: f"{row['engine_id']}/{_configuration(row)}")))
    if data.outliers:
        out.append(Section("outliers", "Requests far from their group", [_outlier_text(data)], _rows_table(
            "outliers-table", OUTLIER_COLUMNS, data.outliers, lambda row: f"{row['engine_id']}/{row['request_id']}")))
    if data.measured:
        matched, text = _baseline_text(data)
        out.append(Section("baselines", "Against published baselines", text, _rows_table(
            "baselines-table", BASELINE_COLUMNS, matched, lambda row: f"{_configuration(row)}/{row['position']}")
            if matched else None))
    if data.context_caps:
        out.append(Section("context-caps", "Context capped by the drafter", [CAP_NOTE],
                           _rows_table("context-caps-table", CAP_COLUMNS, data.context_caps)))
    return out


def markdown(data: ReportData, generated: datetime, chart_files: dict[str, str]) -> str:
    """The report as Markdown; charts are linked files (``chart_files``: chart name → file name)."""
    lines = ["# Speculative decoding report", "",
             f"Window: {data.window.describe()}. Generated {_stamp(generated)}.", ""]
    if data.empty:
        return "\n".join([*lines, f"**No request-steps in this window.** {_empty_hint(data)}", ""])
    lines.append(_summary(data))
    for section in sections(data):
        lines += ["", f"## {section.title}"]
        for paragraph in section.before:
            lines += ["", md_text(paragraph)]
        if section.table is not None:
            lines += ["", *_md_table(section.table.header, [[md_text(text) for text, _ in cells]
                                                            for _, cells in section.table.rows])]
        if section.charts:
            lines += [line for name, file in chart_files.items() for line in ("", f"![{name}]({file})")]
        for paragraph in section.after:
            lines += ["", md_text(paragraph)]
    return "\n".join([*lines, ""])


def html(data: ReportData, generated: datetime, drawn: Sequence[Chart]) -> str:
    """The report as one HTML page with ``drawn`` (its :func:`charts`) inline: no script, no
    network, no server."""
    body = ["<h1>Speculative decoding report</h1>",
            f'<p class="window">Window: {escape(data.window.describe())}. Generated {escape(_stamp(generated))}.</p>']
    if data.empty:
        body.append(f'<p class="empty"><strong>No request-steps in this window.</strong> '
                    f"{escape(_empty_hint(data))}</p>")
    else:
        body.append(f'<p class="summary">{escape(_summary(data))}</p>')
    for section in sections(data):
        body.append(f'<section id="{section.id}"><h2>{escape(section.title)}</h2>')
        body += [f"<p>{escape(paragraph)}</p>" for paragraph in section.before]
        if section.table is not None:
            body.append(_html_table(section.table))
        if section.charts:
            body += [f'<figure id="chart-{chart.name}">{chart.svg}</figure>' for chart in drawn]
        body += [f'<p class="note">{escape(paragraph)}</p>' for paragraph in section.after]
        body.append("</section>")
    title = f"specmetrics report: {data.window.describe()}"
    return "\n".join([
        "<!doctype html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f"<title>{escape(title)}</title>", f"<style>{_STYLE}</style>", "</head>",
        "<body>", *body, "</body>", "</html>", ""])


_STYLE = (
    "body{font-family:sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0;display:block;overflow-x:auto;font-size:.9em}"
    "td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}"
    "td:first-child,th:first-child{text-align:left}figure{margin:1em 0}.empty{background:#fff3cd;padding:1em}"
)


def _baseline_text(data: ReportData) -> tuple[list[Row], list[str]]:
    """The rows of the configurations a published baseline matches, and the sentences around them: what
    the baselines are, and each configuration none matches."""
    matched = data.baselines
    keys = {(r["model"], r["method"], r["num_spec_tokens"]) for r in matched}
    missing = sorted({(r["model"], r["method"], r["num_spec_tokens"]) for r in data.measured} - keys)
    sources = sorted({f"{p['dataset']}, {p['sampling']}; {p['source']}" for p in data.published})
    text = [("Per position, the share of drafts that accepted it (vLLM's definition), corrected and as vLLM "
             "reports it, next to the acceptance published for the same model, method and K "
             f"({' / '.join(sources)}). Other prompts and sampling move these rates: a gap says where to "
             "look, not that the drafter is broken.")] if matched else []
    if missing:
        published = ", ".join(f"{p['model']} ({p['method']}, K = {p['num_spec_tokens']})" for p in data.published)
        text.append("No published baseline matches " + "; ".join(f"{model} ({method}, K = {k})"
                                                              for model, method, k in missing)
                    + f". Baselines exist for: {published}.")
    return matched, text


def _outlier_text(data: ReportData) -> str:
    """How many requests are far from their group's acceptance, and which the table lists."""
    first = data.outliers[0]
    total, low = first["outliers"], first["low_outliers"]
    listed = "all of them" if total <= len(data.outliers) else f"the {len(data.outliers)} farthest"
    return (f"{total:,} requests with {OUTLIER_MIN_DRAFTS} drafts or more have an acceptance rate "
            f"{OUTLIER_MARGIN * 100:.0f} points or more from their group's: {low:,} below (read their output "
            f"first if it looks garbled), {total - low:,} above (loops); {listed}:")


def _headline_note(data: ReportData) -> str | None:
    """One sentence on the biggest way vLLM's numbers mislead in this window, if any."""
    h = data.headline
    extra = (h["vllm_num_drafts"] or 0) - (h["num_drafts"] or 0)
    if not extra:
        return None
    if not h["num_drafts"]:
        return (f"No drafts were made in this window: vLLM counted {extra:,} request-steps that skipped drafting "
                "(or whose drafts were all grammar-invalid) as drafts, hence its acceptance numbers.")
    return (f"vLLM counted {extra:,} request-steps without real drafts (skipped for length, or all drafts "
            "grammar-invalid) as drafts; the corrected numbers leave them out.")


def _audit_text(data: ReportData) -> str:
    """One sentence on whether the vLLM-reported numbers, rebuilt from the outcomes, equal the counters
    vLLM computed itself (the audit)."""
    checked = sum(row["audited_request_steps"] for row in data.audit)
    differing = sum(row["differing_request_steps"] for row in data.audit)
    unchecked = data.request_steps - checked
    without = (f"{unchecked:,} request-steps lie in steps without vLLM's own counters (vLLM computed none: stats "
               "off; or written before schema 1.6).")
    if not checked:
        return f"Not checked against vLLM's own counters: all {without}"
    if differing:
        versions = ", ".join(sorted({row["vllm_version"] for row in data.drift}))
        return (f"Warning: {differing:,} of the {checked:,} request-steps checked against vLLM's own counters lie in "
                f"steps where the vLLM-reported numbers, rebuilt from the outcomes, differ from them (vLLM "
                f"{versions}): see below.")
    equal = (f"Checked against vLLM's own counters: the vLLM-reported numbers, rebuilt from the outcomes, equal the "
             f"counters vLLM computed at every step of {checked:,} request-steps.")
    return f"{equal} The other {without}" if unchecked else equal


def _summary(data: ReportData) -> str:
    only = sum(row["steps"] for row in data.vllm_only)
    unseen = f"{only:,} steps with vLLM's numbers only (no corrected metric: see below)."
    if not data.request_steps:
        return f"No request-step the plugin observed; {unseen}"
    seen = f"{data.request_steps:,} request-steps from {_stamp(data.first_event)} to {_stamp(data.last_event)}."
    return f"{seen} Besides them, {unseen}" if only else seen


def _empty_hint(data: ReportData) -> str:
    return ("Check the window (--since/--until are UTC) and that the ingester writes to this data directory."
            if data.window.since or data.window.until else "The data directory holds no request-steps yet.")


def _stamp(t: datetime | None) -> str:
    return "–" if t is None else t.strftime("%Y-%m-%d %H:%M:%S UTC")


MAX_CHART_BUCKETS = 2000


def _every_bucket(data: ReportData) -> dict[datetime, Row | None]:
    """The timeline's buckets from first to last, None where no request-step fell, so the lines
    break over an outage instead of joining across it (unless that would be too many points)."""
    rows: dict[datetime, Row | None] = {r["bucket_start"]: r for r in data.timeline}
    if not rows:
        return rows
    first, last = min(rows), max(rows)
    if (last - first) / data.bucket > MAX_CHART_BUCKETS:
        return rows
    # first + i * bucket never passes last: a step past it would overflow at datetime's end (9999-12-31)
    starts = (first + i * data.bucket for i in range(int((last - first) / data.bucket) + 1))
    return {start: rows.get(start) for start in starts}


def _time_label(t: datetime, data: ReportData) -> str:
    if data.bucket.total_seconds() < 60:
        return t.strftime("%H:%M:%S")
    return t.strftime("%m-%d %H:%M") if data.bucket.total_seconds() < 86400 else t.strftime("%Y-%m-%d")


def _context_label(row: Row) -> str:
    return "unknown" if row["context_start"] is None else f"{row['context_start']}–{row['context_end']}"


def md_text(value: Any) -> str:
    """Text from the data (engine ids, models, methods) as Markdown that shows it literally: HTML
    escaped as in the HTML report (Markdown passes tags through), and Markdown's own marks
    (links, emphasis, code, strike-through) backslash-escaped. ``|`` is left to the table."""
    return _MD_MARKS.sub(r"\\\g<0>", escape(fmt("text", value), quote=False))


_MD_MARKS = re.compile(r"[\\`*_\[\]~]")


def _rows_table(table_id: str, columns: Sequence[tuple[str, str, str]], rows: Sequence[Row],
                row_key: Callable[[Row], str] = lambda row: str(row["engine_id"])) -> Table:
    """``rows`` as a table of ``columns`` (key, label, format), each row keyed by ``row_key`` (its
    engine id)."""
    return Table(table_id, [label for _, label, _ in columns], [
        (row_key(row), [(fmt(kind, row[key]), row[key] if kind != "text" else None) for key, _, kind in columns])
        for row in rows])


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return [line(header), "|" + "---|" * len(header), *(line(r) for r in rows)]


def _html_table(table: Table) -> str:
    """The table's raw values kept in ``data-value``, so the page's numbers can be checked exactly."""
    out = [f'<table id="{table.id}"><thead><tr>', *(f"<th>{escape(h)}</th>" for h in table.header),
           "</tr></thead><tbody>"]
    for key, cells in table.rows:
        out.append(f'<tr data-key="{escape(key)}">')
        for text, raw in cells:
            value = "" if raw is None else f' data-value="{escape(repr(raw))}"'
            out.append(f"<td{value}>{escape(text)}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)
