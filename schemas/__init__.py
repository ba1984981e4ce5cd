"""The event contract shared by every stage: pydantic models, wire encoding, Arrow schema."""

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
