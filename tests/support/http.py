"""Plain HTTP reads of the services the tests start."""

from __future__ import annotations

import urllib.request


def get(port: int, path: str) -> bytes | None:
    """The body of ``GET http://127.0.0.1:PORT/PATH``; None while nothing answers there (or not 200)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            body: bytes = response.read()
            return body
    except OSError:
        return None
