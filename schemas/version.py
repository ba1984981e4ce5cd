"""Schema versioning.

The rule (see docs/design.md#events, "Schema versions"):

* Within a major version only additive changes are allowed: a new envelope field or outcome
  column must be optional with a default, so every reader of that major version can still
  read every record of it. Readers ignore envelope fields they do not know.
* A new outcome kind or ``k_zero_reason`` bumps the minor version. A reader that meets a kind
  or ``k_zero_reason`` it does not know sends that record to the dead-letter sink (nothing is lost: the
  original bytes are kept and can be re-ingested after upgrading).
* Anything else (renaming, removing, changing a meaning or a type) is a new major version.
  A reader rejects every major version other than its own with a clear reason.

History: 1.0 the first contract; 1.1 adds the ``k_zero_reason`` ``verify_budget`` (with
``k_sched``/``k_valid``/``k_invalid`` on such outcomes) and the envelope field ``drafts_verified``
(Model Runner V2's adaptive verification); 1.2 adds the envelope field ``dropped_steps`` (the steps
the sending plugin process has dropped so far, for the live metrics); 1.3 adds the engine context
fields ``max_model_len`` and ``context_cap_from`` (vLLM lowering the target's context to the
drafter's), the envelope field ``skip_check`` (whether skips for length could be seen) and the
``k_zero_reason`` ``skip_drafts`` (vLLM 0.33's ``SchedulerOutput.skip_drafts`` told the drafter to
skip); 1.4 adds the outcome kind ``grammar_rejected`` (vLLM 0.34's sync scheduling verifies the
first grammar-invalid draft, which vLLM counts and the target always rejects); 1.5 adds the outcome
field ``seq_len`` (the request's own sequence length where the drafter-fit check decided about the
drafts verified at the step: whether the request alone would have fit the drafter); 1.6 adds the
envelope fields ``vllm_counts`` (vLLM's own ``SpecDecodingStats`` of the step, for the audit of the
plugin's vLLM-compatible numbers) and ``vllm_counts_missing`` (why a step has none); 1.7 adds the
envelope field ``vllm_finished`` (vLLM's own per-request metrics, ``RequestSpecDecodeMetrics``, of the
requests that finished at the step, when vLLM runs with ``--per-request-spec-decode-metrics``); 1.8
adds the outcome kind ``vllm_only`` and the envelope field ``vllm_only`` (a step whose outcomes the
plugin did not see, recorded from vLLM's stat logger with vLLM's own counters only, and why); 1.9
adds the stored column ``log_source`` (the name under which the table keeps the log a row was read
from: with ``log_partition`` and ``log_offset``, where its step sat), which no message carries.
"""

from __future__ import annotations

SCHEMA_MAJOR = 1
SCHEMA_MINOR = 9
SCHEMA_VERSION = f"{SCHEMA_MAJOR}.{SCHEMA_MINOR}"


class UnsupportedSchemaVersion(ValueError):
    """A record was written with a schema major version this reader does not know."""


def check_schema_version(version: object) -> None:
    """Raise :class:`UnsupportedSchemaVersion` unless ``version`` is ``"<SCHEMA_MAJOR>.<minor>"``."""
    if not isinstance(version, str):
        raise UnsupportedSchemaVersion(f"schema_version must be a string like '1.0', got {version!r}")
    major, _, minor = version.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        raise UnsupportedSchemaVersion(f"schema_version {version!r} is not of the form MAJOR.MINOR")
    if int(major) != SCHEMA_MAJOR:
        raise UnsupportedSchemaVersion(
            f"schema_version {version!r} has major version {int(major)}; this reader supports "
            f"major version {SCHEMA_MAJOR} only (upgrade specmetrics to read it)"
        )
