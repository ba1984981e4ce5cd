"""Plain HTTP reads of the services the tests start."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from typing import Any


def get(port: int, path: str) -> bytes | None:
    """The body of ``GET http://127.0.0.1:PORT/PATH``; None while nothing answers there (or not 200)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            body: bytes = response.read()
            return body
    except OSError:
        return None


def prometheus_api(port: int, path: str, **params: str) -> Any:
    """The ``data`` of a Prometheus HTTP API answer."""
    body = get(port, f"{path}?{urllib.parse.urlencode(params)}" if params else path)
    assert body is not None, path
    answer = json.loads(body)
    assert answer["status"] == "success", answer
    return answer["data"]
