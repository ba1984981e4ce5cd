"""The embedded local log: append-only, fsynced segment files (the zero-setup transport)."""

from emitter.log.reader import LocalLogReader
from emitter.log.segment import LogRecord
from emitter.log.writer import LocalLogWriter

__all__ = ["LocalLogReader", "LocalLogWriter", "LogRecord"]
