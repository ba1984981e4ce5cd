"""``specmetrics serve``: a read-only static file server for the reports folder."""

from __future__ import annotations

import argparse
import functools
import logging
import signal
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve", help="Serve a folder (the reports) read-only over HTTP: GET and HEAD only, nothing outside it.")
    parser.add_argument("--dir", required=True, type=Path, help="The folder to serve.")
    parser.add_argument("--port", type=int, default=8080, help="TCP port (default 8080; 0: any free port).")
    parser.add_argument("--bind", default="127.0.0.1",
                        help="Address to listen on (default 127.0.0.1; 0.0.0.0 in a container).")
    parser.set_defaults(run=run)


class ReadOnlyFiles(SimpleHTTPRequestHandler):
    """``SimpleHTTPRequestHandler`` (GET and HEAD only) that also refuses any path that
    resolves outside the served folder, such as a symbolic link pointing elsewhere."""

    def translate_path(self, path: str) -> str:
        root = Path(self.directory).resolve()
        translated = Path(super().translate_path(path)).resolve()
        if translated != root and not translated.is_relative_to(root):
            return str(root / ".specmetrics-outside-the-served-folder")  # does not exist: 404
        return str(translated)

    def log_message(self, format: str, *args: Any) -> None:
        logger.info("%s %s", self.address_string(), format % args)


def make_server(directory: Path, bind: str, port: int) -> ThreadingHTTPServer:
    """A server for ``directory`` on ``bind:port`` (not yet serving)."""
    if not directory.is_dir():
        raise ValueError(f"{directory} is not a folder")
    handler = functools.partial(ReadOnlyFiles, directory=str(directory))
    return ThreadingHTTPServer((bind, port), handler)


def run(args: argparse.Namespace) -> int:
    server = make_server(args.dir, args.bind, args.port)
    print(f"serving {args.dir} read-only at http://{args.bind}:{server.server_address[1]}/", flush=True)

    def terminate(signum: int, frame: object) -> None:
        # shutdown() waits for serve_forever to return, so it cannot run on the serving thread; an
        # exception raised here instead could land inside a request and be swallowed by the server.
        threading.Thread(target=server.shutdown, daemon=True).start()

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        server.serve_forever()
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.server_close()
    return 0
