-- wasted_verification: the draft slots the target verified that held no draft, per group.
--
-- One row per group with request-steps. A step skipped for length makes the target verify
-- placeholders nobody drafted; async scheduling pads grammar-invalid drafts with -1 tokens that
-- are verified too. vLLM counts both as rejected drafts; here they are verification work wasted,
-- apart from the drafts that were rejected (definitions: the verification macros).
--
-- Example:
--   SELECT engine_id, verified_slots, wasted_slots, wasted_share FROM wasted_verification ORDER BY wasted_share DESC
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   verified_slots          draft slots the target verified (k_sched of request-steps not k_zero; BIGINT)
--   placeholder_slots       of those, placeholders of steps skipped for length (BIGINT)
--   pad_slots               of those, -1 pads (BIGINT)
--   wasted_slots            placeholder_slots + pad_slots (BIGINT)
--   wasted_share            wasted_slots / verified_slots (DOUBLE; NULL when nothing was verified)
--
-- wasted_verification_between(t0, t1) is the same over t0 <= event_time < t1 (NULL: open end);
-- the view wasted_verification is it over all time. wasted_verification_between(NULL, NULL,
-- source := 'name') is it over the shape counts of the table name (outcome_counts): the report's.
CREATE OR REPLACE MACRO wasted_verification_between(t0, t1, source := NULL) AS TABLE
WITH slots AS (
    SELECT
        engine_id,
        model,
        method,
        num_spec_tokens,
        num_verified_slots(kind, k_sched, request_steps) AS verified_slots,
        num_placeholder_slots(kind, k_valid, request_steps) AS placeholder_slots,
        num_pad_slots(kind, k_sched, k_valid, request_steps) AS pad_slots
    FROM outcome_counts(t0, t1, source)
    GROUP BY engine_id, model, method, num_spec_tokens
)
SELECT
    *,
    placeholder_slots + pad_slots AS wasted_slots,
    (placeholder_slots + pad_slots) / nullif(verified_slots, 0) AS wasted_share
FROM slots;

CREATE OR REPLACE VIEW wasted_verification AS
FROM wasted_verification_between(NULL, NULL)
ORDER BY engine_id, model, method, num_spec_tokens;

COMMENT ON MACRO TABLE wasted_verification_between IS 'Verified draft slots per group and those that held no draft (placeholders of steps skipped for length, -1 pads), with their share; window t0 <= event_time < t1.';
COMMENT ON VIEW wasted_verification IS 'Verified draft slots per group and those that held no draft (placeholders of steps skipped for length, -1 pads), with their share.';
