"""The embedded local log: append-only, fsynced segment files (the zero-setup transport)."""

from emitter.log.reader import LocalLogReader, LogGap
from emitter.log.segment import LogCorrupted, LogRecord
from emitter.log.writer import LocalLogWriter

__all__ = ["LocalLogReader", "LocalLogWriter", "LogCorrupted", "LogGap", "LogRecord"]
