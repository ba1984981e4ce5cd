"""specmetrics queries: layered DuckDB views over the table, and a read-only way to run SQL.

``con = connect(data_dir)`` builds the views; ``run_query(con, sql, params)`` runs one read-only
statement and returns a ``pyarrow.Table``; ``describe_views(con)`` lists the views with their
meaning. The SQL lives in ``queries/sql/{staging,intermediate,metrics}/``, one view per file.
"""

from specmetrics.queries.catalog import (
    PUBLIC_MACROS,
    PUBLIC_VIEWS,
    SOURCE_VIEW,
    connect,
    describe_views,
    run_query,
    sql_files,
)
from specmetrics.queries.guard import QueryRejected, check_read_only

__all__ = [
    "PUBLIC_MACROS",
    "PUBLIC_VIEWS",
    "SOURCE_VIEW",
    "QueryRejected",
    "check_read_only",
    "connect",
    "describe_views",
    "run_query",
    "sql_files",
]
