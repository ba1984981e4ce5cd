"""``file:///absolute/dir``: where the embedded local log lives."""

from __future__ import annotations

from urllib.parse import ParseResult


def local_log_dir(url: ParseResult) -> str:
    """The directory a parsed ``file://`` URL names. Neither a host nor a user is echoed back."""
    if not url.path or url.netloc not in ("", "localhost"):
        raise ValueError("a local log URL looks like file:///absolute/dir (no host, no user)")
    return url.path
