"""docs/views.md is generated from the SQL headers and current; every documented example runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specmetrics.queries import PUBLIC_MACROS, PUBLIC_VIEWS, run_query
from specmetrics.queries.docs import documents, render

DOCS = Path(__file__).resolve().parents[2] / "docs" / "views.md"


def test_views_md_is_current() -> None:
    assert DOCS.read_text() == render(), \
        "docs/views.md is stale: run `python -m specmetrics.queries.docs > docs/views.md`"


def test_every_view_is_documented_with_columns_and_an_example(connect_rows: Any, outcomes: Any) -> None:
    con = connect_rows([outcomes.drafted(3, 2), outcomes.skipped(3), outcomes.k_zero("no_proposal"),
                        outcomes.grammar_async(1, 2, 1)])
    docs = {doc.name.split("(")[0]: doc for doc in documents()}
    assert set(PUBLIC_VIEWS) | {"acceptance_timeline"} <= set(docs)
    text = render()
    for macro in PUBLIC_MACROS:
        assert f"{macro}(" in text, macro
    for name, doc in docs.items():
        assert doc.summary and doc.columns and len(doc.example) == 1, name
        result = run_query(con, doc.example[0])
        assert result.num_columns > 0, name
        documented = {c.strip() for columns, _ in doc.columns for c in columns.split(",")}
        if name in PUBLIC_VIEWS:
            actual = set(run_query(con, f"SELECT * FROM {name} LIMIT 0").column_names)
            assert actual <= documented, (name, actual - documented)
