-- grammar_invalid: drafts that broke the grammar (structured output), per group.
--
-- One row per group with request-steps. Counts request-steps of kind grammar_invalid (some drafts
-- invalid, in sync mode truncated before scheduling, in async mode scheduled as -1 pads) or
-- grammar_rejected (vLLM 0.34 on, sync: the first invalid draft is verified and always rejected,
-- the rest cut), and the k_zero request-steps whose drafts the grammar cut to nothing (k_zero_reason
-- 'grammar_truncated'). vLLM counts an all-invalid request-step as a draft, and the invalid draft it
-- verified as a draft token; the corrected metrics count neither.
--
-- Example:
--   SELECT engine_id, share, all_invalid_steps, invalid_token_share FROM grammar_invalid
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   request_steps             all request-steps of the group (BIGINT)
--   grammar_invalid_steps     request-steps of kind grammar_invalid or grammar_rejected (BIGINT)
--   all_invalid_steps         of those, with no valid draft left (k_valid = 0) (BIGINT)
--   truncated_to_zero_steps   k_zero request-steps with k_zero_reason grammar_truncated (BIGINT)
--   share                     grammar_invalid_steps / request_steps (DOUBLE)
--   valid_tokens              valid drafts verified in those request-steps (sum of k_valid; BIGINT)
--   invalid_tokens            drafts invalidated, over both kinds (sum of k_invalid; BIGINT)
--   invalid_token_share       invalid_tokens / (valid_tokens + invalid_tokens) (DOUBLE; NULL when both 0)
--   accepted_tokens           drafts accepted in those request-steps (BIGINT)
--   verified_invalid_tokens   invalid drafts the target verified and rejected (grammar_rejected's
--                             k_sched - k_valid), which vLLM counts as draft tokens (BIGINT)
--
-- grammar_invalid_between(t0, t1) is the same over t0 <= event_time < t1 (NULL: open end); the
-- view grammar_invalid is it over all time.
CREATE OR REPLACE MACRO grammar_invalid_between(t0, t1) AS TABLE
WITH totals AS (
    SELECT
        engine_id,
        model,
        method,
        num_spec_tokens,
        CAST(sum(request_steps) AS BIGINT) AS request_steps,
        CAST(coalesce(sum(request_steps) FILTER (WHERE is_grammar_invalid(kind)), 0) AS BIGINT) AS grammar_invalid_steps,
        CAST(coalesce(sum(request_steps) FILTER (WHERE is_grammar_invalid(kind) AND k_valid = 0), 0) AS BIGINT)
            AS all_invalid_steps,
        CAST(coalesce(sum(request_steps) FILTER (WHERE k_zero_reason = 'grammar_truncated'), 0) AS BIGINT)
            AS truncated_to_zero_steps,
        CAST(coalesce(sum(request_steps * k_valid) FILTER (WHERE is_grammar_invalid(kind)), 0) AS BIGINT) AS valid_tokens,
        CAST(coalesce(sum(request_steps * k_invalid)
                      FILTER (WHERE is_grammar_invalid(kind) OR k_zero_reason = 'grammar_truncated'), 0) AS BIGINT)
            AS invalid_tokens,
        CAST(coalesce(sum(request_steps * accepted) FILTER (WHERE is_grammar_invalid(kind)), 0) AS BIGINT)
            AS accepted_tokens,
        CAST(coalesce(sum(request_steps * (k_sched - k_valid)) FILTER (WHERE kind = 'grammar_rejected'), 0) AS BIGINT)
            AS verified_invalid_tokens
    FROM outcome_histogram_between(t0, t1)
    GROUP BY engine_id, model, method, num_spec_tokens
)
SELECT
    engine_id,
    model,
    method,
    num_spec_tokens,
    request_steps,
    grammar_invalid_steps,
    all_invalid_steps,
    truncated_to_zero_steps,
    grammar_invalid_steps / request_steps AS share,
    valid_tokens,
    invalid_tokens,
    invalid_tokens / nullif(valid_tokens + invalid_tokens, 0) AS invalid_token_share,
    accepted_tokens,
    verified_invalid_tokens
FROM totals;

CREATE OR REPLACE VIEW grammar_invalid AS
FROM grammar_invalid_between(NULL, NULL)
ORDER BY engine_id, model, method, num_spec_tokens;

COMMENT ON MACRO TABLE grammar_invalid_between IS 'Grammar-invalid request-steps per group: share, all-invalid and truncated-to-zero steps, valid/invalid/accepted tokens; window t0 <= event_time < t1.';
COMMENT ON VIEW grammar_invalid IS 'Grammar-invalid request-steps per group: share, all-invalid and truncated-to-zero steps, valid/invalid/accepted tokens.';
