"""The monitoring profile's files: the Grafana dashboard, the alerting rules, Prometheus' config and
Grafana's provisioning, checked without running Prometheus or Grafana.

Every PromQL expression parses (``promql_parser``, after Grafana's variables are replaced with valid
stand-ins), names only series the ingester's endpoint exposes (``monitoring.families``), applies
``rate``/``increase`` to counters only and divides only by a denominator guarded against 0. The
dashboard filters every series by its template variables, shows every family, and the files point at
each other where the compose file mounts them. Each check first shows that it catches what it is for.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml

from specmetrics.monitoring.families import FAMILIES, SAMPLE_NAMES
from tests.support.compose import ROOT, all_services, bind_mounts

MONITORING = ROOT / "docker" / "monitoring"
DASHBOARD_FILE = MONITORING / "grafana" / "dashboards" / "speculative_decoding.json"
ALERTS_FILE = MONITORING / "prometheus" / "alerts.yml"
PROMETHEUS_FILE = MONITORING / "prometheus" / "prometheus.yml"
PROVISIONING = MONITORING / "grafana" / "provisioning"

#: Series Prometheus itself records for every scrape target.
PROMETHEUS_SERIES = frozenset({"up"})
#: Grafana's built-in variables that stand for a duration, with a stand-in of that kind.
BUILTIN_STAND_INS = {"__rate_interval": "1m", "__interval": "30s", "__range": "1h"}
#: The template variables of vLLM's own dashboard, which this one keeps.
VLLM_VARIABLES = ("job", "model_name", "instance", "engine")
VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")
LABEL_VALUES = re.compile(r"^label_values\((?P<selector>.+),\s*(?P<label>\w+)\)$", re.DOTALL)
QUERY_RESULT = re.compile(r"^query_result\((?P<expr>.+)\)$", re.DOTALL)
RANGE = re.compile(r"\[([^\[\]]+)\]")
COUNTERS = frozenset(family.sample_name for family in FAMILIES if family.type == "counter")
LABELS = {family.sample_name: family.labels for family in FAMILIES}


def load_dashboard() -> dict[str, Any]:
    dashboard: dict[str, Any] = json.loads(DASHBOARD_FILE.read_text())
    return dashboard


def load_yaml(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def all_panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every panel, those inside collapsed rows included."""
    for panel in panels:
        yield panel
        yield from all_panels(panel.get("panels", []))


def variables(dashboard: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {variable["name"]: variable for variable in dashboard["templating"]["list"]}


def substitute(expr: str, defined: set[str], keep_variables: bool = False) -> str:
    """``expr`` as Prometheus receives it: Grafana's duration variables replaced with durations and
    the template variables (``$name``, ``${name}``, ``[[name]]``) with ``.*``, or kept as they are
    (they stand in label matchers' strings). A variable the dashboard does not define fails."""

    def replace(match: re.Match[str]) -> str:
        name = next(group for group in match.groups() if group)
        if name in BUILTIN_STAND_INS:
            return BUILTIN_STAND_INS[name]
        assert name in defined, f"${name} is not a variable of the dashboard: {expr}"
        return match.group(0) if keep_variables else ".*"

    return VARIABLE.sub(replace, expr)


def template_expr(query: str) -> str:
    """The PromQL inside a query variable's ``label_values(selector, label)`` or ``query_result(expr)``."""
    if match := LABEL_VALUES.match(query):
        return match["selector"]
    match = QUERY_RESULT.match(query)
    assert match, f"{query!r} is neither label_values(selector, label) nor query_result(expr)"
    return match["expr"]


def nodes(expr: promql_parser.Expr) -> list[promql_parser.Expr]:
    found: list[promql_parser.Expr] = []
    promql_parser.walk(expr, found.append)
    return found


def selectors(expr: str) -> list[promql_parser.VectorSelector]:
    return [node for node in nodes(promql_parser.parse(expr)) if isinstance(node, promql_parser.VectorSelector)]


def unknown_series(expr: str) -> set[str]:
    """Metric names ``expr`` selects that the endpoint does not expose ('' for a selector without one)."""
    return {selector.name or "" for selector in selectors(expr)} - SAMPLE_NAMES - PROMETHEUS_SERIES


def gauges_under_rate(expr: str) -> set[str]:
    """Series given to ``rate``, ``irate`` or ``increase`` that are not counters."""
    wrong = set()
    for node in nodes(promql_parser.parse(expr)):
        if isinstance(node, promql_parser.Call) and node.func.name in {"rate", "irate", "increase"}:
            (matrix,) = node.args
            name = matrix.vector_selector.name or ""
            if name not in COUNTERS:
                wrong.add(name)
    return wrong


def is_guarded(denominator: promql_parser.Expr) -> bool:
    """Whether a denominator cannot be 0: ``(x > 0)``, ``clamp_min(x, m)`` or a non-zero number."""
    if isinstance(denominator, promql_parser.NumberLiteral):
        return denominator.val != 0
    if isinstance(denominator, promql_parser.Call):
        return denominator.func.name == "clamp_min"
    if isinstance(denominator, promql_parser.ParenExpr):
        inner = denominator.expr
        return (isinstance(inner, promql_parser.BinaryExpr) and str(inner.op) == ">"
                and isinstance(inner.rhs, promql_parser.NumberLiteral) and inner.rhs.val == 0
                and not (inner.modifier and inner.modifier.return_bool))
    return False


def unguarded_divisions(expr: str) -> list[str]:
    return [str(node.rhs) for node in nodes(promql_parser.parse(expr))
            if isinstance(node, promql_parser.BinaryExpr) and str(node.op) == "/" and not is_guarded(node.rhs)]


def missing_filters(expr: str) -> set[str]:
    """``label=~"$label"`` matchers of the template variables that a selector of ``expr`` lacks, as
    ``metric: label``: every variable among the series' labels (job and instance: every series)."""
    missing = set()
    for selector in selectors(expr):
        labels = LABELS.get(selector.name or "")
        if labels is None:
            continue
        matchers = {(m.name, m.value) for m in selector.matchers.matchers if m.op == promql_parser.MatchOp.Re}
        for label in VLLM_VARIABLES:
            if (label in labels or label in {"job", "instance"}) and (label, f"${label}") not in matchers:
                missing.add(f"{selector.name}: {label}")
    return missing


def dashboard_targets() -> list[tuple[str, str]]:
    """(panel title and refId, expression) of every panel target."""
    return [(f"{panel['id']} {panel['title']} {target.get('refId')}", target["expr"])
            for panel in all_panels(load_dashboard()["panels"]) for target in panel.get("targets", [])]


def template_queries() -> list[tuple[str, str]]:
    return [(name, variable["query"]) for name, variable in variables(load_dashboard()).items()
            if variable["type"] == "query"]


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in load_yaml(ALERTS_FILE)["groups"] for rule in group["rules"]]


DEFINED = set(variables(load_dashboard()))
TARGETS = dashboard_targets()
TARGET_IDS = [name for name, _ in TARGETS]


def test_the_checks_catch_what_they_are_for() -> None:
    with pytest.raises(ValueError):
        promql_parser.parse("sum(rate(specmetrics_ingest_steps_total[1m])")
    with pytest.raises(AssertionError, match=r"\$modelname"):
        substitute('specmetrics_ingest_steps_total{job=~"$modelname"}', DEFINED)
    assert substitute('x{a=~"${job}", b=~"[[engine]]"}[$__rate_interval]', DEFINED) == 'x{a=~".*", b=~".*"}[1m]'
    made_up = 'sum(rate(specmetrics_spec_decode_drafts_totl{job=~"$job"}[5m])) / time()'
    assert unknown_series(made_up) == {"specmetrics_spec_decode_drafts_totl"}
    assert unknown_series('{__name__="specmetrics_ingest_steps_total"}') == {""}
    assert unknown_series("time() - max(specmetrics_last_event_timestamp_seconds) + up") == set()
    assert gauges_under_rate("rate(specmetrics_ingest_consumer_lag_records[5m])") == {
        "specmetrics_ingest_consumer_lag_records"}
    assert len(unguarded_divisions("sum(rate(a_total[1m])) / sum(rate(b_total[1m]))")) == 1
    assert unguarded_divisions("a / (b > bool 0)") and unguarded_divisions("a / (b > 1)")
    assert not unguarded_divisions("a / (b > 0) + a / clamp_min(b, 1) + a / 2")
    assert missing_filters('specmetrics_request_steps_total{job=~"$job", instance=~"$instance", '
                           'engine=~"$engine", model_name="$model_name"}') == {
        "specmetrics_request_steps_total: model_name"}
    assert missing_filters('specmetrics_ingest_steps_total{job=~"$job"}') == {
        "specmetrics_ingest_steps_total: instance"}


@pytest.mark.parametrize(("panel", "expr"), TARGETS, ids=TARGET_IDS)
def test_every_dashboard_expression_parses_and_selects_only_exposed_series(panel: str, expr: str) -> None:
    promql = substitute(expr, DEFINED)
    promql_parser.parse(promql)
    assert unknown_series(promql) == set()
    assert gauges_under_rate(promql) == set()
    assert unguarded_divisions(promql) == []
    assert missing_filters(substitute(expr, DEFINED, keep_variables=True)) == set()
    assert set(RANGE.findall(expr)) <= {"$__rate_interval", "$__range"}, "ranges follow Grafana's intervals"


@pytest.mark.parametrize(("name", "query"), template_queries(), ids=[name for name, _ in template_queries()])
def test_every_template_query_parses_and_lists_its_own_label_of_an_exposed_series(name: str, query: str) -> None:
    promql = substitute(template_expr(query), DEFINED)
    promql_parser.parse(promql)
    assert unknown_series(promql) == set()
    match = LABEL_VALUES.match(query)
    assert match and match["label"] == name, f"${name} lists {query}"


def test_the_dashboard_shows_every_family_of_the_endpoint() -> None:
    shown = {selector.name for _, expr in TARGETS for selector in selectors(substitute(expr, DEFINED))}
    assert shown == SAMPLE_NAMES


def test_the_dashboard_keeps_vllms_variables_and_every_panel_reads_the_datasource_variable() -> None:
    dashboard = load_dashboard()
    found = variables(dashboard)
    assert found["datasource"]["type"] == "datasource" and found["datasource"]["query"] == "prometheus"
    for name in VLLM_VARIABLES:
        assert found[name]["type"] == "query", name
        assert found[name]["datasource"]["uid"] == "${datasource}", name
    panels = list(all_panels(dashboard["panels"]))
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids)), "duplicate panel ids"
    for panel in panels:
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        targets = panel["targets"]
        ref_ids = [target.get("refId") for target in targets]
        assert targets and all(ref_ids) and len(set(ref_ids)) == len(ref_ids), panel["title"]
        assert all(target.get("datasource", panel["datasource"]) == panel["datasource"] for target in targets)


def test_every_corrected_acceptance_series_is_shown_beside_vllms() -> None:
    """A panel that selects a corrected acceptance counter also selects its vLLM counterpart."""
    for panel in all_panels(load_dashboard()["panels"]):
        names = {selector.name or "" for target in panel.get("targets", [])
                 for selector in selectors(substitute(target["expr"], DEFINED))}
        if "specmetrics_spec_decode_reached_per_pos_total" in names:
            continue  # the conditional rate per position, which vLLM does not compute
        corrected = {name for name in names if name.startswith("specmetrics_spec_decode_")}
        vllm = {name.replace("specmetrics_spec_decode_", "specmetrics_vllm_spec_decode_") for name in corrected}
        assert vllm <= names, f"{panel['title']}: no vLLM value beside {sorted(corrected)}"


RULES = alert_rules()


@pytest.mark.parametrize("rule", RULES, ids=[rule.get("alert", "?") for rule in RULES])
def test_every_alert_is_complete_and_its_expression_selects_only_exposed_series(rule: dict[str, Any]) -> None:
    assert {"alert", "expr", "for", "labels", "annotations"} <= set(rule)
    assert rule["labels"]["severity"] in {"critical", "warning", "info"}
    assert rule["annotations"]["summary"] and rule["annotations"]["description"]
    promql_parser.parse_duration(rule["for"])
    promql_parser.parse(rule["expr"])
    assert unknown_series(rule["expr"]) == set()
    assert gauges_under_rate(rule["expr"]) == set()
    assert unguarded_divisions(rule["expr"]) == []


def test_the_alerts_cover_acceptance_collapse_ingest_lag_freshness_plugin_drops_and_dead_letters() -> None:
    names = [rule["alert"] for rule in RULES]
    assert len(names) == len(set(names))
    used = {rule["alert"]: {selector.name for selector in selectors(rule["expr"])} for rule in RULES}
    both_rates = {"specmetrics_spec_decode_accepted_tokens_total", "specmetrics_vllm_spec_decode_accepted_tokens_total"}
    assert used["SpecDecodeDraftingSkipped"] >= both_rates
    assert "not a bad drafter" in next(r for r in RULES if r["alert"] == "SpecDecodeDraftingSkipped")[
        "annotations"]["summary"]
    assert used["SpecDecodeDrafterCollapse"] >= both_rates
    assert used["SpecmetricsIngestLagHigh"] == {"specmetrics_ingest_consumer_lag_records"}
    assert used["SpecmetricsIngestStale"] == {"specmetrics_last_event_timestamp_seconds",
                                              "specmetrics_ingest_consumer_lag_records"}
    assert used["SpecmetricsIngestStalled"] == {"specmetrics_ingest_stalled_seconds"}
    assert used["SpecmetricsPluginDroppedSteps"] == {"specmetrics_plugin_dropped_steps_total"}
    assert used["SpecmetricsDeadLettersRising"] == {"specmetrics_ingest_dead_letters_total"}


def test_prometheus_scrapes_the_ingest_service_and_loads_the_mounted_rules() -> None:
    config = load_yaml(PROMETHEUS_FILE)
    prometheus = bind_mounts(all_services()["prometheus"])
    assert prometheus["/etc/prometheus/prometheus.yml"][0] == PROMETHEUS_FILE  # the image's default config path
    assert config["rule_files"] == ["/etc/prometheus/alerts.yml"]
    assert prometheus["/etc/prometheus/alerts.yml"][0] == ALERTS_FILE
    (job,) = config["scrape_configs"]
    port = all_services()["ingest"]["environment"]["SPECMETRICS_INGEST_METRICS_PORT"]
    assert job["job_name"] == "specmetrics-ingest"
    assert job["dns_sd_configs"] == [{"names": ["ingest"], "type": "A", "port": int(port)}]
    assert job.get("metrics_path", "/metrics") == "/metrics"


def test_grafana_provisions_the_prometheus_service_and_the_mounted_dashboards() -> None:
    grafana = bind_mounts(all_services()["grafana"])
    assert grafana["/etc/grafana/provisioning"][0] == PROVISIONING
    (datasource,) = load_yaml(PROVISIONING / "datasources" / "prometheus.yml")["datasources"]
    assert datasource["type"] == "prometheus" and datasource["isDefault"]
    assert datasource["url"] == "http://prometheus:9090"
    assert [port.split(":")[-1] for port in all_services()["prometheus"]["ports"]] == ["9090/tcp"]
    (provider,) = load_yaml(PROVISIONING / "dashboards" / "dashboards.yml")["providers"]
    assert provider["type"] == "file"
    assert grafana[provider["options"]["path"]][0] == DASHBOARD_FILE.parent
    home = all_services()["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == f"{provider['options']['path']}/{DASHBOARD_FILE.name}"
