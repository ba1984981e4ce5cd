"""A TCP proxy in front of a Kafka broker that notes the API key of every request passing through it,
for tests of which requests a client sends (the broker advertises the proxy's port, so every
connection a client opens goes through it)."""

from __future__ import annotations

import socket
import struct
import threading
from types import TracebackType

#: Kafka API keys the tests look for.
JOIN_GROUP, LEAVE_GROUP = 11, 13


class RequestProxy:
    """Forwards ``127.0.0.1:port`` to the broker on ``upstream_port``; :attr:`api_keys` lists the requests seen."""

    def __init__(self, port: int, upstream_port: int) -> None:
        self.port, self._upstream = port, upstream_port
        self.api_keys: list[int] = []
        self._server = socket.create_server(("127.0.0.1", port))
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            broker = socket.create_connection(("127.0.0.1", self._upstream))
            threading.Thread(target=self._requests, args=(client, broker), daemon=True).start()
            threading.Thread(target=_pump, args=(broker, client), daemon=True).start()

    def _requests(self, client: socket.socket, broker: socket.socket) -> None:
        """Client to broker, one request frame at a time: a 4-byte size, then the API key first."""
        try:
            while True:
                head = _read(client, 4)
                body = _read(client, struct.unpack(">i", head)[0])
                self.api_keys.append(struct.unpack(">h", body[:2])[0])
                broker.sendall(head + body)
        except OSError:
            pass
        finally:
            client.close()
            broker.close()

    def close(self) -> None:
        self._closed = True
        self._server.close()

    def __enter__(self) -> RequestProxy:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _read(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            target.sendall(chunk)
    except OSError:
        pass
    finally:
        source.close()
        target.close()
