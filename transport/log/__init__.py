"""The embedded local log: append-only, fsynced segment files (the zero-setup transport)."""

from specmetrics.transport.log.reader import LocalLogReader, LogGap
from specmetrics.transport.log.segment import LogCorrupted, LogRecord
from specmetrics.transport.log.writer import LocalLogWriter

__all__ = ["LocalLogReader", "LocalLogWriter", "LogCorrupted", "LogGap", "LogRecord"]
