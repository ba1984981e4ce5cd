"""The event contract shared by every stage: pydantic models, wire encoding, Arrow schema.

The names below are imported from their modules on first use: a reader of the table needs the
Arrow schema alone, not the pydantic models (0.1 s a process)."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specmetrics.schemas.arrow import REQUEST_STEP_SCHEMA
    from specmetrics.schemas.events import (
        Drafted,
        GrammarInvalid,
        GrammarRejected,
        KZero,
        KZeroReason,
        OutcomeKind,
        SkippedForLength,
        StepEnvelope,
        StepEvent,
        step_event_json_schema,
    )
    from specmetrics.schemas.version import SCHEMA_VERSION, UnsupportedSchemaVersion, check_schema_version
    from specmetrics.schemas.wire import InvalidRecord, OutcomeColumns, decode_step, encode_step

__all__ = [
    "REQUEST_STEP_SCHEMA",
    "SCHEMA_VERSION",
    "Drafted",
    "GrammarInvalid",
    "GrammarRejected",
    "InvalidRecord",
    "KZero",
    "KZeroReason",
    "OutcomeColumns",
    "OutcomeKind",
    "SkippedForLength",
    "StepEnvelope",
    "StepEvent",
    "UnsupportedSchemaVersion",
    "check_schema_version",
    "decode_step",
    "encode_step",
    "step_event_json_schema",
]


def __getattr__(name: str) -> Any:
    """A name of ``__all__``, from the first of the modules (lightest first) that defines it."""
    if name in __all__:
        for module in ("arrow", "version", "events", "wire"):
            found = import_module(f"{__name__}.{module}")
            if hasattr(found, name):
                return getattr(found, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
