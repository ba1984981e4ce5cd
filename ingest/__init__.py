"""Ingest: source → validated Arrow batches → Parquet, exactly once."""

from specmetrics.ingest.ingester import Ingester, IngestStats
from specmetrics.ingest.settings import IngestSettings

__all__ = ["IngestSettings", "IngestStats", "Ingester"]
