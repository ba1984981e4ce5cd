"""Ingest: source → validated Arrow batches → Parquet, exactly once."""

from ingest.ingester import Ingester, IngestStats
from ingest.settings import IngestSettings

__all__ = ["IngestSettings", "IngestStats", "Ingester"]
