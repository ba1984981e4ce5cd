"""Sources the ingester reads, chosen by URL."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

from ingest.sources.base import Source, SourceRecord
from ingest.sources.local_log import LocalLogSource


def open_source(url: str, state_dir: Path) -> Source:
    """Open the source a URL names: ``file:///path/to/log`` is the embedded local log."""
    parsed = urlparse(url)
    if parsed.scheme == "file":
        if not parsed.path or parsed.netloc not in ("", "localhost"):
            raise ValueError(f"a local log URL looks like file:///absolute/dir, got {url!r}")
        return LocalLogSource(parsed.path, state_dir)
    raise ValueError(f"unsupported source URL {url!r}: this version supports file:///dir (the local log)")


__all__ = ["LocalLogSource", "Source", "SourceRecord", "open_source"]
