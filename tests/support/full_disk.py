"""A real full disk for tests run as root of a user namespace of their own (``unshare --user
--map-root-user --mount``), where they can mount a small tmpfs."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path


def mount_tmpfs(disk: Path, size: str) -> None:
    """Mount a tmpfs of ``size`` (``1m``) on ``disk``, or exit saying why the test cannot run."""
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk)], check=False).returncode:
        sys.exit(f"cannot mount a {size} tmpfs in a user namespace: this test needs one for its full disk")


def fill(disk: Path) -> int:
    """Write ``disk/filler`` until not one more byte fits; its open descriptor (close it, remove the
    file, and the disk has room again)."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
    for chunk in (65536, 4096, 1):
        try:
            while True:
                os.write(fd, bytes(chunk))
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return fd
