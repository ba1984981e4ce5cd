"""The embedded local log: append-only, fsynced segment files (the zero-setup transport)."""

from transport.log.reader import LocalLogReader, LogGap
from transport.log.segment import LogCorrupted, LogRecord
from transport.log.writer import LocalLogWriter

__all__ = ["LocalLogReader", "LocalLogWriter", "LogCorrupted", "LogGap", "LogRecord"]
