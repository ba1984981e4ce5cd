"""The live endpoint as the tests read it: scraped over HTTP and parsed by prometheus_client, and
the same series computed from the views over the stored tree."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from specmetrics.queries.catalog import connect

#: A sample: (name, sorted label pairs) -> value.
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]

_GROUP = "model AS model_name, engine_id AS engine, method, CAST(num_spec_tokens AS VARCHAR) AS num_spec_tokens"
#: For each counter of request-steps: the query over the views that gives its series.
VIEW_SERIES = {
    "specmetrics_spec_decode_drafts_total": f"SELECT {_GROUP}, num_drafts FROM acceptance",
    "specmetrics_spec_decode_draft_tokens_total": f"SELECT {_GROUP}, num_draft_tokens FROM acceptance",
    "specmetrics_spec_decode_accepted_tokens_total": f"SELECT {_GROUP}, num_accepted_tokens FROM acceptance",
    "specmetrics_vllm_spec_decode_drafts_total": f"SELECT {_GROUP}, num_drafts FROM acceptance_vllm",
    "specmetrics_vllm_spec_decode_draft_tokens_total": f"SELECT {_GROUP}, num_draft_tokens FROM acceptance_vllm",
    "specmetrics_vllm_spec_decode_accepted_tokens_total":
        f"SELECT {_GROUP}, num_accepted_tokens FROM acceptance_vllm",
    "specmetrics_spec_decode_accepted_tokens_per_pos_total":
        f"SELECT {_GROUP}, CAST(position AS VARCHAR) AS position, num_accepted FROM acceptance_per_position",
    "specmetrics_spec_decode_reached_per_pos_total":
        f"SELECT {_GROUP}, CAST(position AS VARCHAR) AS position, num_reached FROM acceptance_per_position",
    "specmetrics_vllm_spec_decode_accepted_tokens_per_pos_total":
        f"SELECT {_GROUP}, CAST(position AS VARCHAR) AS position, vllm_num_accepted FROM position_counts",
    "specmetrics_request_steps_total":
        f"SELECT {_GROUP}, kind, coalesce(k_zero_reason, '') AS k_zero_reason, request_steps FROM outcome_shares",
    "specmetrics_emitted_tokens_total": f"SELECT {_GROUP}, sum(emitted) FROM request_steps GROUP BY ALL",
    # spelt out here rather than read from wasted_verification, so the check is independent of its macros
    "specmetrics_verified_draft_slots_total":
        f"SELECT {_GROUP}, sum(k_sched) FILTER (WHERE kind <> 'k_zero') FROM request_steps GROUP BY ALL",
    "specmetrics_wasted_draft_slots_total":
        f"SELECT {_GROUP}, 'placeholder' AS cause, sum(k_valid) FILTER (WHERE kind = 'skipped_for_length') "
        f"FROM request_steps GROUP BY ALL UNION ALL SELECT {_GROUP}, 'pad' AS cause, sum(k_sched - k_valid) "
        "FILTER (WHERE kind IN ('skipped_for_length', 'grammar_invalid')) FROM request_steps GROUP BY ALL",
}


def scrape(port: int) -> Samples:
    """Every sample the endpoint on ``port`` exposes."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def series(samples: Samples, name: str) -> Samples:
    return {key: value for key, value in samples.items() if key[0] == name}


def view_series(data_dir: Path) -> Samples:
    """The counters of request-steps, computed from the views over the tree in ``data_dir``."""
    con = connect(data_dir)
    expected: Samples = {}
    try:
        for name, query in VIEW_SERIES.items():
            relation = con.sql(query)
            labels = relation.columns[:-1]
            for *values, count in relation.fetchall():
                expected[(name, tuple(sorted(zip(labels, values, strict=True))))] = float(count or 0)
    finally:
        con.close()
    return expected


def wait_for(condition: Callable[[], bool], timeout_s: float = 60, what: str = "the condition",
             interval_s: float = 0.1) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval_s)
