"""The metric families of the live endpoint: names, types, help text and labels.

One declaration per family, read by the exporter (what it exposes), the docs and the tests of the
Grafana dashboard and alerting rules (every name they use must be one of these). Counters are
declared without the ``_total`` suffix that the exposition adds. The request-step counters carry
:data:`GROUP_LABELS`, the labels of vLLM's own metrics plus the speculative method and K, so one
engine has a bounded set of series (docs/metrics.md counts them); a request id is never a label.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: The group of a request-step, as Prometheus labels: the view's (model, engine_id, method,
#: num_spec_tokens) under the label names of vLLM's metrics.
GROUP_LABELS = ("model_name", "engine", "method", "num_spec_tokens")


@dataclass(frozen=True, slots=True)
class Family:
    """One metric family."""

    name: str
    type: Literal["counter", "gauge"]
    help: str
    labels: tuple[str, ...]

    @property
    def sample_name(self) -> str:
        """The name of its samples in the exposition (counters end in ``_total``)."""
        return f"{self.name}_total" if self.type == "counter" else self.name


def _group(name: str, kind: Literal["counter", "gauge"], help_text: str, *extra: str) -> Family:
    return Family(name, kind, help_text, (*GROUP_LABELS, *extra))


# The corrected counters: the views acceptance and acceptance_per_position.
DRAFTS = _group("specmetrics_spec_decode_drafts", "counter",
                "Corrected drafts: request-steps of kind drafted, or grammar_invalid or grammar_rejected "
                "with valid drafts left.")
DRAFT_TOKENS = _group("specmetrics_spec_decode_draft_tokens", "counter",
                      "Draft tokens the target verified in corrected drafts (sum of k_valid).")
ACCEPTED_TOKENS = _group("specmetrics_spec_decode_accepted_tokens", "counter",
                         "Draft tokens accepted in corrected drafts.")
ACCEPTED_PER_POSITION = _group("specmetrics_spec_decode_accepted_tokens_per_pos", "counter",
                               "Corrected drafts whose draft at this 0-based position was accepted.", "position")
REACHED_PER_POSITION = _group("specmetrics_spec_decode_reached_per_pos", "counter",
                              "Corrected drafts with a verified draft at this 0-based position (the denominator "
                              "of the conditional per-position rate).", "position")
# The same as vLLM 0.32.0 counts them: the view acceptance_vllm and vLLM's per-position counter.
VLLM_DRAFTS = _group("specmetrics_vllm_spec_decode_drafts", "counter",
                     "Drafts as vLLM counts them: request-steps with draft slots scheduled, placeholders included.")
VLLM_DRAFT_TOKENS = _group("specmetrics_vllm_spec_decode_draft_tokens", "counter",
                           "Draft tokens as vLLM counts them (sum of k_valid over its drafts).")
VLLM_ACCEPTED_TOKENS = _group("specmetrics_vllm_spec_decode_accepted_tokens", "counter",
                              "Accepted tokens as vLLM counts them.")
VLLM_ACCEPTED_PER_POSITION = _group("specmetrics_vllm_spec_decode_accepted_tokens_per_pos", "counter",
                                    "vLLM drafts whose draft at this 0-based position was accepted.", "position")
# vLLM's own counters, as each step event carries them (schema 1.6): the audit of the ones above.
VLLM_OWN_DRAFTS = _group("specmetrics_vllm_own_spec_decode_drafts", "counter",
                         "Drafts as vLLM itself counted them in each step (its SpecDecodingStats); equal to "
                         "specmetrics_vllm_spec_decode_drafts unless the plugin's model of vLLM's counting drifted.")
VLLM_OWN_DRAFT_TOKENS = _group("specmetrics_vllm_own_spec_decode_draft_tokens", "counter",
                               "Draft tokens as vLLM itself counted them in each step.")
VLLM_OWN_ACCEPTED_TOKENS = _group("specmetrics_vllm_own_spec_decode_accepted_tokens", "counter",
                                  "Accepted tokens as vLLM itself counted them in each step.")
VLLM_OWN_ACCEPTED_PER_POSITION = _group("specmetrics_vllm_own_spec_decode_accepted_tokens_per_pos", "counter",
                                        "Drafts accepted at this 0-based position as vLLM itself counted them.",
                                        "position")
VLLM_COUNTS_MISSING = _group("specmetrics_vllm_counts_missing_steps", "counter",
                             "Steps whose event carries none of vLLM's own counters: stats_off (vLLM runs with "
                             "--disable-log-stats), not_returned, or unreported (a plugin before schema 1.6).",
                             "reason")
# Steps the plugin saw only through vLLM's stat logger (schema 1.8, the view vllm_only_steps): vLLM's
# numbers alone, kept apart from the audit above, and no corrected counter.
VLLM_ONLY_STEPS = _group("specmetrics_vllm_only_steps", "counter",
                         "Steps recorded with vLLM's own counters only, no outcome (the scheduler hook was off: "
                         "step_hook_off, did not install: step_hook_not_installed, or stopped itself: "
                         "step_hook_disabled): the corrected metrics do not count them.", "reason")
VLLM_ONLY_DRAFTS = _group("specmetrics_vllm_only_spec_decode_drafts", "counter",
                          "Drafts as vLLM itself counted them in the steps recorded with its counters only.", "reason")
VLLM_ONLY_DRAFT_TOKENS = _group("specmetrics_vllm_only_spec_decode_draft_tokens", "counter",
                                "Draft tokens as vLLM itself counted them in the steps recorded with its counters "
                                "only.", "reason")
VLLM_ONLY_ACCEPTED_TOKENS = _group("specmetrics_vllm_only_spec_decode_accepted_tokens", "counter",
                                   "Accepted tokens as vLLM itself counted them in the steps recorded with its "
                                   "counters only.", "reason")
# What happened to speculation: the view outcome_shares, and the verification work wasted.
REQUEST_STEPS = _group("specmetrics_request_steps", "counter",
                       "Request-steps by outcome kind and K = 0 reason (empty unless kind is k_zero).",
                       "kind", "k_zero_reason")
EMITTED_TOKENS = _group("specmetrics_emitted_tokens", "counter", "Tokens the request-steps emitted.")
VERIFIED_SLOTS = _group("specmetrics_verified_draft_slots", "counter",
                        "Draft slots the target verified: k_sched of every request-step that is not k_zero "
                        "(placeholders and -1 pads included).")
WASTED_SLOTS = _group("specmetrics_wasted_draft_slots", "counter",
                      "Verified draft slots that held no draft: placeholders of steps skipped for length "
                      "(cause placeholder) and -1 pads (cause pad).", "cause")
LAST_EVENT_TIME = _group("specmetrics_last_event_timestamp_seconds", "gauge",
                         "Event time of the latest request-step counted, Unix seconds.")
PLUGIN_DROPPED_STEPS = _group("specmetrics_plugin_dropped_steps", "counter",
                              "Steps the vLLM plugin dropped (queue full or sink failure), as its latest step event "
                              "reports them; resets when the engine restarts.")
MAX_MODEL_LEN = _group("specmetrics_max_model_len", "gauge",
                       "The target's max model length as the engine serves it, as its latest step event reports it.")
CONTEXT_CAP_FROM = _group("specmetrics_context_cap_from", "gauge",
                          "The target's max model length before vLLM lowered it to the drafter's (Model Runner V2 "
                          "cannot skip drafting for longer sequences); only for engines whose context was lowered.")
# Pipeline health of the ingester that serves the endpoint.
INGEST_STEPS = Family("specmetrics_ingest_steps", "counter", "Valid step events counted.", ())
INGEST_ROWS = Family("specmetrics_ingest_request_steps", "counter", "Request-steps counted.", ())
INGEST_DEAD_LETTERS = Family("specmetrics_ingest_dead_letters", "counter",
                             "Records set aside as dead letters (unreadable, or breaking the contract).", ())
INGEST_DUPLICATE_STEPS = Family("specmetrics_ingest_duplicate_steps", "counter",
                                "Of the dead letters, steps read again at a later offset (a producer's resend): "
                                "stored and counted once.", ())
INGEST_LOST_OFFSETS = Family("specmetrics_ingest_lost_offsets", "counter",
                             "Offsets found gone from the source and recorded as lost (--accept-loss).", ())
INGEST_LAG = Family("specmetrics_ingest_consumer_lag_records", "gauge",
                    "Records written to the source but not read yet, per partition this ingester reads.",
                    ("source", "partition"))
INGEST_STALLED = Family("specmetrics_ingest_stalled_seconds", "gauge",
                        "Seconds the ingester has had work it does not do: waiting for its consumer group to hand "
                        "out partitions, or holding partitions with records behind and reading none; 0 while it "
                        "keeps up.", ("source",))

FAMILIES = (
    DRAFTS, DRAFT_TOKENS, ACCEPTED_TOKENS, ACCEPTED_PER_POSITION, REACHED_PER_POSITION,
    VLLM_DRAFTS, VLLM_DRAFT_TOKENS, VLLM_ACCEPTED_TOKENS, VLLM_ACCEPTED_PER_POSITION,
    VLLM_OWN_DRAFTS, VLLM_OWN_DRAFT_TOKENS, VLLM_OWN_ACCEPTED_TOKENS, VLLM_OWN_ACCEPTED_PER_POSITION,
    VLLM_COUNTS_MISSING, VLLM_ONLY_STEPS, VLLM_ONLY_DRAFTS, VLLM_ONLY_DRAFT_TOKENS, VLLM_ONLY_ACCEPTED_TOKENS,
    REQUEST_STEPS, EMITTED_TOKENS, VERIFIED_SLOTS, WASTED_SLOTS, LAST_EVENT_TIME,
    PLUGIN_DROPPED_STEPS, MAX_MODEL_LEN, CONTEXT_CAP_FROM,
    INGEST_STEPS, INGEST_ROWS, INGEST_DEAD_LETTERS, INGEST_DUPLICATE_STEPS, INGEST_LOST_OFFSETS, INGEST_LAG,
    INGEST_STALLED,
)

#: Every sample name the endpoint exposes.
SAMPLE_NAMES = frozenset(family.sample_name for family in FAMILIES)
