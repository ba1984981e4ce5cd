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
--   num_verify_steps(kind, k_sched, request_steps)           request-steps whose draft slots the target
--                                                            verified: not k_zero, k_sched > 0 (BIGINT)
--   num_verified_accepted(kind, k_sched, accepted, request_steps)   sum of accepted over them (BIGINT)
--   tokens_per_verify_step(verified_accepted, verify_steps)  1 + verified_accepted / verify_steps: the
--                                                            tokens a request gets per verification
--                                                            (DOUBLE; NULL without one)
CREATE OR REPLACE MACRO num_verified_slots(kind, k_sched, request_steps := 1) AS
    CAST(coalesce(sum(request_steps * k_sched) FILTER (WHERE kind <> 'k_zero'), 0) AS BIGINT);

CREATE OR REPLACE MACRO num_placeholder_slots(kind, k_valid, request_steps := 1) AS
    CAST(coalesce(sum(request_steps * k_valid) FILTER (WHERE is_skipped(kind)), 0) AS BIGINT);

CREATE OR REPLACE MACRO num_pad_slots(kind, k_sched, k_valid, request_steps := 1) AS
    CAST(coalesce(sum(request_steps * (k_sched - k_valid))
                  FILTER (WHERE kind IN ('skipped_for_length', 'grammar_invalid')), 0) AS BIGINT);

CREATE OR REPLACE MACRO num_verify_steps(kind, k_sched, request_steps := 1) AS
    CAST(coalesce(sum(request_steps) FILTER (WHERE kind <> 'k_zero' AND k_sched > 0), 0) AS BIGINT);

CREATE OR REPLACE MACRO num_verified_accepted(kind, k_sched, accepted, request_steps := 1) AS
    CAST(coalesce(sum(request_steps * accepted) FILTER (WHERE kind <> 'k_zero' AND k_sched > 0), 0) AS BIGINT);

CREATE OR REPLACE MACRO tokens_per_verify_step(verified_accepted, verify_steps) AS
    1 + verified_accepted / nullif(verify_steps, 0);

COMMENT ON MACRO num_verify_steps IS 'Request-steps whose draft slots the target verified: not k_zero, k_sched > 0 (aggregate; request_steps weights a row).';
COMMENT ON MACRO num_verified_accepted IS 'Sum of accepted over the request-steps whose draft slots the target verified (aggregate; request_steps weights a row).';
COMMENT ON MACRO tokens_per_verify_step IS '1 + verified_accepted / verify_steps: the tokens a request gets per verification; NULL without one.';
COMMENT ON MACRO num_verified_slots IS 'Draft slots the target verified: k_sched of request-steps that are not k_zero (aggregate; request_steps weights a row).';
COMMENT ON MACRO num_placeholder_slots IS 'Verified placeholders: k_valid of request-steps skipped for length (aggregate; request_steps weights a row).';
COMMENT ON MACRO num_pad_slots IS 'Verified -1 pads: k_sched - k_valid of skipped_for_length and grammar_invalid request-steps (aggregate; request_steps weights a row).';
