-- verification: the draft slots the target verified, and those that held no draft.
--
-- Scalar macros: aggregates over rows of request-steps, each row weighted by request_steps (1, the
-- default, for request_steps' rows; the count of a histogram row), as the draft counts are. A
-- verified slot is one of the k_sched slots of a request-step that is not k_zero (a k_zero
-- request-step verified nothing, adaptive verification's 'verify_budget' included). A slot held no
-- draft when it was a placeholder of a step skipped for length (its k_valid slots) or a -1 pad
-- (k_sched - k_valid) of a step skipped for length or of grammar-invalid drafts: the target
-- computed it for nothing. A count over no row is 0, never NULL.
--
-- Example:
--   SELECT num_verified_slots(kind, k_sched) AS verified, num_placeholder_slots(kind, k_valid) AS placeholders FROM request_steps
--
-- Columns:
--   num_verified_slots(kind, k_sched, request_steps)         draft slots the target verified (BIGINT)
--   num_placeholder_slots(kind, k_valid, request_steps)      verified placeholders: k_valid of
--                                                            skipped_for_length (BIGINT)
--   num_pad_slots(kind, k_sched, k_valid, request_steps)     verified -1 pads: k_sched - k_valid of
--                                                            skipped_for_length and grammar_invalid (BIGINT)
CREATE OR REPLACE MACRO num_verified_slots(kind, k_sched, request_steps := 1) AS
    CAST(coalesce(sum(request_steps * k_sched) FILTER (WHERE kind <> 'k_zero'), 0) AS BIGINT);

CREATE OR REPLACE MACRO num_placeholder_slots(kind, k_valid, request_steps := 1) AS
    CAST(coalesce(sum(request_steps * k_valid) FILTER (WHERE is_skipped(kind)), 0) AS BIGINT);

CREATE OR REPLACE MACRO num_pad_slots(kind, k_sched, k_valid, request_steps := 1) AS
    CAST(coalesce(sum(request_steps * (k_sched - k_valid))
                  FILTER (WHERE kind IN ('skipped_for_length', 'grammar_invalid')), 0) AS BIGINT);

COMMENT ON MACRO num_verified_slots IS 'Draft slots the target verified: k_sched of request-steps that are not k_zero (aggregate; request_steps weights a row).';
COMMENT ON MACRO num_placeholder_slots IS 'Verified placeholders: k_valid of request-steps skipped for length (aggregate; request_steps weights a row).';
COMMENT ON MACRO num_pad_slots IS 'Verified -1 pads: k_sched - k_valid of skipped_for_length and grammar_invalid request-steps (aggregate; request_steps weights a row).';
