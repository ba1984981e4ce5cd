"""The views on Spark: the same SQL files, transpiled from DuckDB's dialect with sqlglot.

Spark has no macros, so each statement's macro calls are expanded first: a scalar macro
(``definitions/*.sql``) by its body with the arguments in place of its parameters (defaults
filled in), a table macro (``name_between(t0, t1)``) by its body as a subquery. Then sqlglot
writes Spark SQL, and two constructs Spark lacks are rewritten on the syntax tree:

* ``range(n) AS p(position)`` in a FROM list (a table function taking an outer column) becomes
  ``LATERAL EXPLODE(SEQUENCE(0, n - 1)) AS p(position)``;
* ``FROM raw UNION ALL BY NAME SELECT <missing columns> WHERE false`` (how ``request_steps`` reads
  files of older minor versions) becomes ``FROM raw``: the Spark source is read with the stored
  schema, so older files' missing columns are NULL already. The same rule keeps the stored rows'
  branch of ``outcome_counts`` (the other reads a report's table of counts, which Spark never has).

:data:`SPARK_VIEWS` and the views they read are what this module makes; ``specmetrics db export
--dialect spark`` writes their statements, :func:`create_spark_views` runs them over the data
files readers take (:func:`storage.readable.select_files`: for a table, those its log names).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import sqlglot
from sqlglot import exp

from specmetrics.queries.catalog import LAYERS, SOURCE_VIEW, view_statements
from specmetrics.storage.readable import select_files

if TYPE_CHECKING:  # pyspark is an optional dependency
    from pyspark.sql import SparkSession

#: The views made on Spark (with the views they read).
SPARK_VIEWS: tuple[str, ...] = ("acceptance", "acceptance_vllm", "acceptance_per_position", "outcome_shares")
_MACRO = re.compile(r"^CREATE OR REPLACE MACRO (\w+)\(([^)]*)\)\s+AS\s+(TABLE\b)?(.*)$", re.DOTALL | re.IGNORECASE)
_VIEW = re.compile(r"^CREATE OR REPLACE VIEW (\w+)\s+AS\s+(.*)$", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class _Macro:
    params: tuple[str, ...]
    defaults: dict[str, exp.Expr]
    body: exp.Expr
    table: bool


def spark_statements(views: Sequence[str] = SPARK_VIEWS) -> list[str]:
    """``CREATE OR REPLACE TEMPORARY VIEW`` statements in Spark SQL for ``views`` and the views
    they read, in order, over a source view :data:`queries.catalog.SOURCE_VIEW`."""
    macros, queries = _definitions()
    needed: set[str] = set()
    pending = list(views)
    expanded: dict[str, exp.Expr] = {}
    while pending:
        name = pending.pop()
        if name in needed:
            continue
        needed.add(name)
        expanded[name] = query = _expand(queries[name].copy(), macros)
        pending.extend(table.name for table in query.find_all(exp.Table) if table.name in queries)
    return [f"CREATE OR REPLACE TEMPORARY VIEW {name} AS {_to_spark(expanded[name])}"
            for name in queries if name in needed]


def create_spark_views(spark: SparkSession, data: Path, views: Sequence[str] = SPARK_VIEWS) -> None:
    """Create :data:`SOURCE_VIEW` over the data files readers take from the table
    ``data``, and ``views`` over it, as temporary views of ``spark``."""
    files = select_files(data)
    files.warn()
    if not files.data:
        raise FileNotFoundError(f"no data files of the ingester under {str(data)!r}")
    from pyspark.sql.types import StructType  # an optional dependency

    stored: Any = StructType.fromJson(_stored_schema_json())
    frame = spark.read.option("basePath", str(data.resolve())).schema(stored).parquet(
        *(file.location for file in files.files))
    frame.createOrReplaceTempView(SOURCE_VIEW)
    for statement in spark_statements(views):
        spark.sql(statement)


def _stored_schema_json() -> dict[str, Any]:
    """The stored columns as Spark's schema JSON (the partition keys ``dt``, ``hour`` come from the paths)."""
    from pyspark.sql.pandas.types import from_arrow_schema  # an optional dependency

    from specmetrics.schemas.arrow import REQUEST_STEP_SCHEMA

    schema = REQUEST_STEP_SCHEMA.remove_metadata()
    plain = [field.with_type(field.type.value_type) if pa.types.is_dictionary(field.type) else field
             for field in schema]
    converted: dict[str, Any] = from_arrow_schema(pa.schema(plain)).jsonValue()
    return converted


@cache
def _definitions() -> tuple[dict[str, _Macro], dict[str, exp.Expr]]:
    """The macros and the views' queries of every layer, parsed from the SQL files, in file order."""
    statements = view_statements(LAYERS)
    macros: dict[str, _Macro] = {}
    queries: dict[str, exp.Expr] = {}
    for statement in statements:
        text = "\n".join(line for line in statement.splitlines() if not line.lstrip().startswith("--")).strip()
        if match := _MACRO.match(text):
            params, defaults = _parameters(match[2])
            body = sqlglot.parse_one(match[4], read="duckdb")
            macros[match[1].lower()] = _Macro(params, defaults, body, bool(match[3]))
        elif match := _VIEW.match(text):
            queries[match[1].lower()] = sqlglot.parse_one(match[2], read="duckdb")
    return macros, queries


def _parameters(text: str) -> tuple[tuple[str, ...], dict[str, exp.Expr]]:
    names, defaults = [], {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, default = part.partition(":=")
        names.append(name.strip().lower())
        if default:
            defaults[name.strip().lower()] = sqlglot.parse_one(default.strip(), read="duckdb")
    return tuple(names), defaults


def _expand(node: exp.Expr, macros: dict[str, _Macro]) -> exp.Expr:
    """``node`` with every macro call replaced by the macro's body, to the last one."""
    def replace(found: exp.Expr) -> exp.Expr:
        if isinstance(found, exp.Table) and isinstance(found.this, exp.Anonymous):
            macro = macros.get(found.this.name.lower())
            if macro is not None and macro.table:
                alias = found.alias or found.this.name
                body = _expand(_bind(macro, found.this.expressions), macros)
                return exp.Subquery(this=body, alias=exp.TableAlias(this=exp.to_identifier(alias)))
        if isinstance(found, exp.Anonymous):
            macro = macros.get(found.name.lower())
            if macro is not None and not macro.table:
                return exp.Paren(this=_expand(_bind(macro, found.expressions), macros))
        return found

    return node.transform(replace)


def _bind(macro: _Macro, arguments: list[exp.Expr]) -> exp.Expr:
    """The macro's body with its parameters replaced by ``arguments`` (or their defaults)."""
    values = dict(zip(macro.params, arguments, strict=False))
    for name, default in macro.defaults.items():
        values.setdefault(name, default)
    missing = [name for name in macro.params if name not in values]
    if missing:
        raise ValueError(f"a macro call lacks the arguments {missing}")

    def replace(found: exp.Expr) -> exp.Expr:
        if isinstance(found, exp.Column) and not found.table and found.name.lower() in values:
            return exp.Paren(this=values[found.name.lower()].copy())
        return found

    return macro.body.copy().transform(replace)


def _to_spark(query: exp.Expr) -> str:
    def rewrite(found: exp.Expr) -> exp.Expr:
        if isinstance(found, exp.Table) and isinstance(found.this, exp.GenerateSeries):
            series = found.this
            end = series.args["end"] if series.args.get("is_end_exclusive") else series.args["end"] + 1
            sequence = exp.func("SEQUENCE", series.args["start"].copy(), exp.Sub(this=end.copy(),
                                                                               expression=exp.Literal.number(1)))
            return exp.Lateral(this=exp.Explode(this=sequence), alias=found.args.get("alias"))
        if isinstance(found, exp.Union) and found.args.get("by_name"):
            left: exp.Expr = found.left  # the stored source holds every column (see the module docstring)
            return left
        return found

    spark: str = query.transform(rewrite).sql(dialect="spark")
    return spark
