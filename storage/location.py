"""Where an output lives: a local folder, or ``s3://bucket/prefix`` on an object store.

The S3 endpoint, region and credentials come, in this order, from ``SPECMETRICS_S3_*`` (below),
the standard AWS environment (``AWS_ENDPOINT_URL``, ``AWS_REGION`` or ``AWS_DEFAULT_REGION``,
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``) and the AWS config files
(``~/.aws/credentials`` and ``~/.aws/config``, or ``AWS_SHARED_CREDENTIALS_FILE`` and
``AWS_CONFIG_FILE``; the profile ``AWS_PROFILE``, else ``default``). Secrets are held as
:class:`pydantic.SecretStr`: no repr, log line or error message shows them.
"""

from __future__ import annotations

import configparser
import functools
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

if TYPE_CHECKING:
    import pyarrow.fs

logger = logging.getLogger(__name__)

S3_SCHEME = "s3://"


class S3Settings(BaseSettings):
    """Overrides of the AWS environment and files for the object store (``SPECMETRICS_S3_*``)."""

    model_config = SettingsConfigDict(env_prefix="SPECMETRICS_S3_", frozen=True, extra="forbid",
                                      hide_input_in_errors=True)

    endpoint: str | None = Field(default=None, description="The store's URL (http://host:port for a local "
                                 "SeaweedFS or MinIO); None: AWS_ENDPOINT_URL, else AWS S3 itself.")
    region: str | None = Field(default=None, description="None: AWS_REGION, AWS_DEFAULT_REGION, the profile's "
                               "region, else us-east-1.")
    access_key_id: SecretStr | None = None
    secret_access_key: SecretStr | None = None
    session_token: SecretStr | None = None
    create_bucket: bool = Field(default=False, description="An ingester creates the bucket of its --out if the "
                                "store has none of that name (a store of its own, as docker-compose.s3.yml's); "
                                "off: a missing bucket is an error.")


@dataclass(frozen=True)
class S3Credentials:
    """What a client of the store needs, resolved once (see the module docstring)."""

    endpoint: str | None
    region: str
    access_key_id: SecretStr | None
    secret_access_key: SecretStr | None
    session_token: SecretStr | None

    @classmethod
    def resolve(cls, settings: S3Settings | None = None) -> S3Credentials:
        settings = settings or S3Settings()
        profile = os.environ.get("AWS_PROFILE", "default")
        files = _profile(os.environ.get("AWS_SHARED_CREDENTIALS_FILE", "~/.aws/credentials"), profile)
        config = _profile(os.environ.get("AWS_CONFIG_FILE", "~/.aws/config"),
                          profile if profile == "default" else f"profile {profile}")

        def secret(own: SecretStr | None, env: str, key: str) -> SecretStr | None:
            value = own.get_secret_value() if own else os.environ.get(env) or files.get(key)
            return SecretStr(value) if value else None

        return cls(
            endpoint=settings.endpoint or os.environ.get("AWS_ENDPOINT_URL") or config.get("endpoint_url"),
            region=settings.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
            or config.get("region") or "us-east-1",
            access_key_id=secret(settings.access_key_id, "AWS_ACCESS_KEY_ID", "aws_access_key_id"),
            secret_access_key=secret(settings.secret_access_key, "AWS_SECRET_ACCESS_KEY", "aws_secret_access_key"),
            session_token=secret(settings.session_token, "AWS_SESSION_TOKEN", "aws_session_token"),
        )


def _profile(path: str, section: str) -> dict[str, str]:
    parser = configparser.ConfigParser()
    try:
        parser.read(Path(path).expanduser())
    except configparser.Error:
        return {}
    return dict(parser[section]) if parser.has_section(section) else {}


@dataclass(frozen=True)
class S3Location:
    """``s3://bucket/prefix``: the output's root on the object store."""

    bucket: str
    prefix: str
    credentials: S3Credentials

    @classmethod
    def parse(cls, url: str, credentials: S3Credentials | None = None) -> S3Location:
        if not url.startswith(S3_SCHEME):
            raise ValueError(f"not an S3 URL: {url!r} (s3://bucket/prefix)")
        bucket, _, prefix = url.removeprefix(S3_SCHEME).partition("/")
        if not bucket or ".." in prefix.split("/"):
            raise ValueError(f"bad S3 URL {url!r}: expected s3://bucket/prefix")
        return cls(bucket, prefix.strip("/"), credentials or S3Credentials.resolve())

    @property
    def url(self) -> str:
        return f"{S3_SCHEME}{self.bucket}/{self.prefix}".rstrip("/")

    def key(self, relative: str) -> str:
        """The object of ``relative`` (a path under the root), as pyarrow's file system names it."""
        return "/".join(part for part in (self.bucket, self.prefix, relative) if part)

    def filesystem(self) -> pyarrow.fs.S3FileSystem:
        return _filesystem(self.credentials)

    def storage_options(self) -> dict[str, str]:
        """The options delta-rs (object_store) takes for the store. Commits use the store's
        conditional write (``If-None-Match``), so two writers never both create one log entry."""
        c = self.credentials
        options = {"AWS_REGION": c.region, "AWS_CONDITIONAL_PUT": "etag"}
        if c.endpoint:
            options["AWS_ENDPOINT_URL"] = c.endpoint
            options["AWS_ALLOW_HTTP"] = str(c.endpoint.startswith("http://")).lower()
        for key, value in (("AWS_ACCESS_KEY_ID", c.access_key_id), ("AWS_SECRET_ACCESS_KEY", c.secret_access_key),
                           ("AWS_SESSION_TOKEN", c.session_token)):
            if value is not None:
                options[key] = value.get_secret_value()
        return options


@functools.cache
def _filesystem(c: S3Credentials, allow_bucket_creation: bool = False) -> pyarrow.fs.S3FileSystem:
    """One client per store and credentials (it keeps its connections)."""
    from pyarrow.fs import S3FileSystem

    endpoint = c.endpoint
    scheme = "http" if endpoint and endpoint.startswith("http://") else "https"
    return S3FileSystem(
        access_key=c.access_key_id.get_secret_value() if c.access_key_id else None,
        secret_key=c.secret_access_key.get_secret_value() if c.secret_access_key else None,
        session_token=c.session_token.get_secret_value() if c.session_token else None,
        region=c.region, scheme=scheme,
        endpoint_override=endpoint.split("://", 1)[1] if endpoint else None,
        connect_timeout=5, request_timeout=30, allow_bucket_creation=allow_bucket_creation,
    )


def is_s3(target: str | Path) -> bool:
    return str(target).startswith(S3_SCHEME)


def data_root(data: str | Path) -> Path | S3Location:
    """The store a command's ``--data`` names: an ``s3://`` prefix, or a local folder, which must
    exist (an error naming it otherwise)."""
    if is_s3(data):
        return S3Location.parse(str(data))
    root = Path(data).expanduser()
    if not root.exists():
        raise FileNotFoundError(f"data directory {str(data)!r} does not exist: point at an ingester's output "
                                "('specmetrics ingest --out')")
    if not root.is_dir():
        raise NotADirectoryError(f"data directory {str(data)!r} is not a directory")
    return root


def address(root: Path | S3Location, relative: str = "") -> str:
    """``relative`` under ``root`` as readers (DuckDB, delta-rs) and messages name it: a local path,
    or an ``s3://`` URL."""
    base = root.url if isinstance(root, S3Location) else str(root)
    return f"{base}/{relative}" if relative else base


def located(root: Path | S3Location, relative: str) -> tuple[str, pyarrow.fs.FileSystem]:
    """``relative`` under ``root`` for pyarrow: its path, and the file system that holds it (the local
    one for a folder), so that one call reads a local file and an object alike."""
    if isinstance(root, S3Location):
        return root.key(relative), root.filesystem()
    from pyarrow.fs import LocalFileSystem

    return str(root / relative), LocalFileSystem()


#: What the store's error codes mean, for the one line an operator reads.
_STORE_CODES = {
    "SignatureDoesNotMatch": "wrong credentials (the store does not accept the secret key)",
    "InvalidAccessKeyId": "wrong credentials (the store does not know the access key)",
    "AccessDenied": "access denied (the credentials may not do this)",
    "NoSuchBucket": "the bucket does not exist",
}


class StoreError(OSError):
    """A failed request to the store, as one line naming the URL and the cause."""


def store_error(location: S3Location, exc: BaseException) -> OSError:
    """The error of a failed request to the store, as one line naming the URL and the cause (the
    client's chained message, colours and all, goes to the debug log); one already made so is
    passed on as it is."""
    if isinstance(exc, StoreError):
        return exc
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    logger.debug("the store's answer: %s", text)
    code = re.search(r"<Code>(\w+)</Code>", text)  # delta-rs gives the store's answer
    aws = re.search(r"AWS Error ([A-Z_]+)", text)  # pyarrow names its code: ACCESS_DENIED for AccessDenied
    if code:
        reason = _STORE_CODES.get(code[1], code[1])
    elif aws and (name := "".join(word.title() for word in aws[1].split("_"))) in _STORE_CODES:
        reason = _STORE_CODES[name]
    elif any(sign in text for sign in ("Connection refused", "tcp connect error", "dns error", "NETWORK_CONNECTION")):
        reason = f"cannot reach the store at {location.credentials.endpoint or 'AWS S3'}"
    else:
        reason = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return StoreError(f"{location.url}: {reason}")


def create_bucket(location: S3Location) -> bool:
    """Create the bucket of ``location`` if the store has none of that name; whether it did."""
    from pyarrow.fs import FileType

    try:
        filesystem = _filesystem(location.credentials, allow_bucket_creation=True)
        if filesystem.get_file_info(location.bucket).type != FileType.NotFound:
            return False
        filesystem.create_dir(location.bucket)
    except OSError as exc:
        raise store_error(location, exc) from None
    logger.info("created the bucket %s", location.bucket)
    return True
