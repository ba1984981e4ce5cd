"""The read-only guard of :func:`queries.run_query`: one SELECT (or EXPLAIN of one) per call."""

from __future__ import annotations

import duckdb

_READ_ONLY = "a single read-only statement (SELECT, FROM, WITH, VALUES, DESCRIBE, SUMMARIZE, SHOW, or EXPLAIN of one)"


class QueryRejected(ValueError):
    """The SQL is not a single read-only statement."""


def check_read_only(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Raise :class:`QueryRejected` unless ``sql`` is exactly one read-only statement.

    DuckDB's own parser decides the statement type, so comments, string literals and odd spacing
    cannot hide a second statement. ``EXPLAIN ANALYZE`` runs the statement it explains, so the
    explained statement must be read-only too. Syntax errors propagate as ``duckdb.ParserException``.
    """
    statements = con.extract_statements(sql)
    if not statements:
        raise QueryRejected(f"empty query: expected {_READ_ONLY}")
    if len(statements) > 1:
        raise QueryRejected(f"expected {_READ_ONLY}, got {len(statements)} statements: run them one at a time")
    kind = statements[0].type
    if kind == duckdb.StatementType.EXPLAIN:
        inner = con.extract_statements(_explained(sql))
        if len(inner) != 1 or inner[0].type != duckdb.StatementType.SELECT:
            raise QueryRejected(f"EXPLAIN is only allowed of a SELECT statement; expected {_READ_ONLY}")
    elif kind != duckdb.StatementType.SELECT:
        raise QueryRejected(f"{kind.name} statements are not allowed: expected {_READ_ONLY}")


def _explained(sql: str) -> str:
    """The statement an EXPLAIN statement explains: what follows ``EXPLAIN [ANALYZE] [(options)]``."""
    tokens = duckdb.tokenize(sql)
    words: list[tuple[int, str]] = []
    for i, (start, kind) in enumerate(tokens):
        if kind != duckdb.token_type.comment:
            end = tokens[i + 1][0] if i + 1 < len(tokens) else len(sql)
            words.append((start, sql[start:end].strip()))
    i = 1  # words[0] is EXPLAIN
    if i < len(words) and words[i][1].upper() in ("ANALYZE", "ANALYSE"):
        i += 1
    if i < len(words) and words[i][1].startswith("("):
        depth = 0
        while i < len(words):
            depth += words[i][1].count("(") - words[i][1].count(")")
            i += 1
            if depth <= 0:
                break
    return sql[words[i][0]:] if i < len(words) else ""
