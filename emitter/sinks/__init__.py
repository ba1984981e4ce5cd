"""Sinks for encoded step events, chosen by URL (``SPECMETRICS_SINK``)."""

from __future__ import annotations

from urllib.parse import urlparse

from emitter.sinks.base import Sink
from emitter.sinks.local_log import LocalLogSink


def open_sink(url: str) -> Sink:
    """Open the sink a URL names: ``file:///path/to/log`` is the embedded local log."""
    parsed = urlparse(url)
    if parsed.scheme == "file":
        if not parsed.path or parsed.netloc not in ("", "localhost"):
            raise ValueError(f"a local log URL looks like file:///absolute/dir, got {url!r}")
        return LocalLogSink(parsed.path)
    raise ValueError(f"unsupported sink URL {url!r}: this version supports file:///dir (the local log)")


__all__ = ["LocalLogSink", "Sink", "open_sink"]
