"""Where things lie in the ingester's output tree (see ingest.output and queries.rollup)."""

#: The data files, relative to the tree: hive partitions by UTC date and hour of event_time.
DATA_GLOB = "dt=*/hour=*/*.parquet"
#: The folder of the rollups, which mirrors the data files' paths beneath it.
ROLLUP_DIR = "_rollup"
