"""``specmetrics serve``: a read-only static file server for the reports folder.

It serves files only: no directory listings (a folder with ``latest.html`` redirects to it),
no dotfiles, nothing outside the folder. A connection silent for the idle timeout is closed, and
so is one whose request head (request line and headers) is not complete within the head timeout,
however it trickles; at most ``max_connections`` are open at once (others are answered 503 at
once), so slow or idle sockets cannot pile up threads, hold every slot, or delay a stop.
"""

from __future__ import annotations

import argparse
import functools
import io
import logging
import os
import signal
import socket
import threading
import time
import urllib.parse
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

_BUSY = (b"HTTP/1.0 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\n"
         b"Connection: close\r\n\r\n")
_NOT_SERVED = ".specmetrics-not-served"  # never exists: 404


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve", help="Serve a folder (the reports) read-only over HTTP: GET and HEAD of its files only, no "
                      "listings, no dotfiles, nothing outside it.")
    parser.add_argument("--dir", required=True, type=Path, help="The folder to serve.")
    parser.add_argument("--port", type=int, default=8080, help="TCP port (default 8080; 0: any free port).")
    parser.add_argument("--bind", default="127.0.0.1",
                        help="Address to listen on (default 127.0.0.1; 0.0.0.0 in a container).")
    parser.add_argument("--max-connections", type=int, default=256,
                        help="Connections open at once; more are answered 503 (default 256).")
    parser.add_argument("--idle-timeout-s", type=float, default=10.0,
                        help="Close a connection that sends nothing for this long (default 10).")
    parser.add_argument("--head-timeout-s", type=float, default=5.0,
                        help="Close a connection whose request head is not complete this long after the "
                             "server started reading it, however slowly it arrives (default 5).")
    parser.set_defaults(run=run)


class ReportServer(ThreadingHTTPServer):
    """A thread per connection, at most ``max_connections`` of them, each socket with a timeout.
    Closing the server does not wait for open connections (daemon threads)."""

    block_on_close = False
    request_queue_size = 1024  # the listen backlog (socketserver's 5 makes a burst of clients retry for seconds)

    def __init__(self, address: tuple[str, int], handler: Any, max_connections: int, idle_timeout_s: float,
                 head_timeout_s: float) -> None:
        if max_connections < 1 or idle_timeout_s <= 0 or head_timeout_s <= 0:
            raise ValueError("--max-connections must be at least 1, --idle-timeout-s and --head-timeout-s above 0")
        self.idle_timeout_s = idle_timeout_s
        self.head_timeout_s = head_timeout_s
        self._slots = threading.BoundedSemaphore(max_connections)
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            _answer_busy(request)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def _answer_busy(request: socket.socket) -> None:
    try:
        request.settimeout(1.0)
        request.sendall(_BUSY)
    except OSError:
        pass


class _HeadDeadline(io.RawIOBase):
    """The connection's bytes for the request reader, each receive bounded by the idle timeout and by
    what is left until ``deadline`` (a timeout on the socket alone restarts at every byte)."""

    def __init__(self, connection: socket.socket, idle_timeout_s: float) -> None:
        self.connection = connection
        self.idle_timeout_s = idle_timeout_s
        self.deadline = float("inf")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("request head not complete in time")
        self.connection.settimeout(min(self.idle_timeout_s, left))
        return self.connection.recv_into(buffer)


class ReadOnlyFiles(SimpleHTTPRequestHandler):
    """``SimpleHTTPRequestHandler`` (GET and HEAD only) for files alone: 400 for a path that is
    not one (bad escapes, a NUL byte), 404 for dotfiles, folders without ``latest.html`` and
    anything that resolves outside the served folder, such as a symbolic link pointing elsewhere."""

    server: ReportServer

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.idle_timeout_s)
        self._head = _HeadDeadline(self.connection, self.server.idle_timeout_s)
        self.rfile.close()  # the socket stays open: this only lets go of the reader setup() made
        self.rfile = io.BufferedReader(self._head)

    def handle_one_request(self) -> None:
        self._head.deadline = time.monotonic() + self.server.head_timeout_s
        super().handle_one_request()

    def parse_request(self) -> bool:
        parsed = super().parse_request()
        # The head is in (GET and HEAD have no body): the reply goes out under the idle timeout alone.
        self._head.deadline = float("inf")
        self.connection.settimeout(self.server.idle_timeout_s)
        return parsed

    def send_head(self) -> Any:
        try:
            self._target(self.path)
        except ValueError:
            self.send_error(HTTPStatus.BAD_REQUEST, "Bad path")
            return None
        return super().send_head()

    def translate_path(self, path: str) -> str:
        try:
            target = self._target(path)
        except ValueError:
            target = None
        return str(target or Path(self.directory, _NOT_SERVED))

    def _target(self, path: str) -> Path | None:
        """The file ``path`` names, None where it names nothing served; ValueError for a path
        that is not one."""
        text = urllib.parse.unquote(urllib.parse.urlsplit(path).path, errors="strict")
        if "\0" in text or not text.startswith("/"):
            raise ValueError(f"not a path: {path!r}")
        root = Path(self.directory).resolve()
        target = root.joinpath(*(part for part in text.split("/") if part)).resolve()
        if target != root and not target.is_relative_to(root):
            return None
        if any(part.startswith(".") for part in [*text.split("/"), *target.relative_to(root).parts]):
            return None  # dotfiles, and "." or ".." however written
        return target

    def list_directory(self, path: str | os.PathLike[str]) -> None:
        if (Path(path) / "latest.html").is_file():
            self.send_response(HTTPStatus.FOUND)
            self.send_header("Location", "latest.html")
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self.send_error(HTTPStatus.NOT_FOUND, "No listings")

    def log_message(self, format: str, *args: Any) -> None:
        logger.info("%s %s", self.address_string(), format % args)


def make_server(directory: Path, bind: str, port: int, max_connections: int = 256,
                idle_timeout_s: float = 10.0, head_timeout_s: float = 5.0) -> ReportServer:
    """A server for ``directory`` on ``bind:port`` (not yet serving)."""
    if not directory.is_dir():
        raise ValueError(f"{directory} is not a folder")
    handler = functools.partial(ReadOnlyFiles, directory=str(directory))
    return ReportServer((bind, port), handler, max_connections, idle_timeout_s, head_timeout_s)


def run(args: argparse.Namespace) -> int:
    server = make_server(args.dir, args.bind, args.port, args.max_connections, args.idle_timeout_s,
                         args.head_timeout_s)
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
