"""The HTML report in a real headless Chromium (Debian's package, installed by ``make test``):
it lays out, its charts are drawn, and its headline numbers are the SQL ones."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from specmetrics.cli import main
from specmetrics.queries import connect, run_query

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
#: Added to a copy of the page (the report itself has no script): what the browser laid out.
PROBE = """<script>
const charts = [...document.querySelectorAll('svg.chart')].map(svg => {
  const box = svg.getBoundingClientRect();
  return {name: svg.dataset.chart, width: box.width, height: box.height,
          lines: [...svg.querySelectorAll('polyline')].map(p => [p.dataset.series, p.getTotalLength()]),
          bars: [...svg.querySelectorAll('rect[data-value]')].map(r => r.getBBox().height)};
});
const headline = Object.fromEntries([...document.querySelectorAll('#headline-table tr[data-key]')].map(
  tr => [tr.dataset.key, [...tr.querySelectorAll('td')].slice(1).map(td => td.dataset.value ?? null)]));
const probe = document.createElement('pre');
probe.id = 'probe';
probe.textContent = JSON.stringify({charts, headline, title: document.title});
document.body.appendChild(probe);
</script>"""


def chromium(profile: Path, *args: str) -> str:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.fail("Chromium is not installed: `make test` installs Debian's chromium package")
    done = subprocess.run([binary, *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


def test_the_html_report_renders_in_chromium_with_the_sql_numbers(report_tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "reports"
    assert main(["report", "--data", str(report_tree), "--out", str(out), "--format", "html", "--bucket", "1m"]) == 0
    page = (out / "latest.html").read_text()
    assert "<script" not in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    probed = tmp_path / "probed.html"
    probed.write_text(page.replace("</body>", PROBE + "</body>"))

    dom = chromium(tmp_path / "profile", "--dump-dom", probed.as_uri())
    match = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert match, dom[-2000:]
    seen: dict[str, Any] = json.loads(html.unescape(match.group(1)))

    assert seen["title"].startswith("specmetrics report:")
    charts = {c["name"]: c for c in seen["charts"]}
    assert list(charts) == ["timeline", "positions", "context", "requests", "k_zero"]
    assert all((c["width"], c["height"]) == (720, 300) for c in charts.values())
    # minutes 0-1 have corrected rates, 0-2 vLLM ones, then a gap; minute 5 is a lone dot
    assert [series for series, _ in charts["timeline"]["lines"]] == ["corrected", "vLLM-reported"]
    assert all(length > 0 for _, length in charts["timeline"]["lines"] + charts["positions"]["lines"])
    assert {series for series, _ in charts["positions"]["lines"]} == {
        "corrected, over all drafts", "corrected, over drafts reaching it", "vLLM-reported"}
    assert len(charts["k_zero"]["bars"]) == 2 and all(h > 0 for h in charts["k_zero"]["bars"])
    # one request per engine: a at 4 of 6 (60-70 %), b at 2 of 2 (the last bucket), half of the requests each
    requests = charts["requests"]["bars"]
    assert len(requests) == 10 and [i for i, h in enumerate(requests) if h > 0] == [6, 9] and requests[6] == requests[9]

    con = connect(report_tree)
    try:
        [sql] = run_query(con, """
            SELECT sum(c.num_drafts) AS nd, sum(v.num_drafts) AS vnd,
                   sum(c.num_accepted_tokens) / sum(c.num_draft_tokens) AS rate,
                   sum(v.num_accepted_tokens) / sum(v.num_draft_tokens) AS vrate,
                   1 + sum(c.num_accepted_tokens) / sum(c.num_drafts) AS mal,
                   1 + sum(v.num_accepted_tokens) / sum(v.num_drafts) AS vmal
            FROM acceptance c JOIN acceptance_vllm v USING (engine_id, model, method, num_spec_tokens)
        """).to_pylist()
    finally:
        con.close()
    headline = {key: [None if v is None else float(v) for v in values] for key, values in seen["headline"].items()}
    assert headline["num_drafts"] == [sql["nd"], sql["vnd"]] == [3, 6]
    assert headline["acceptance_rate"] == [sql["rate"], sql["vrate"]]
    assert headline["mean_acceptance_length"] == [sql["mal"], sql["vmal"]]

    shot = tmp_path / "report.png"
    chromium(tmp_path / "profile", f"--screenshot={shot}", "--window-size=1000,2400", (out / "latest.html").as_uri())
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
