-- k_zero_reasons: why nothing was drafted (K = 0), per group and k_zero_reason.
--
-- One row per group and k_zero_reason with request-steps of kind k_zero. vLLM counts none of
-- these but 'verify_budget'; the reasons are 'no_proposal' (the proposer had nothing, e.g. ngram
-- without a match), 'length_trim' (no room left before max length), 'grammar_truncated' (the
-- grammar cut every draft before scheduling), 'schedule' (the scheduler gave no draft slots),
-- 'unknown', 'verify_budget' (drafts were scheduled, and vLLM counts them, but adaptive
-- verification's budget for the step was 0: none was verified), and 'skip_drafts' (vLLM 0.33 on:
-- the scheduler told the drafter that no request would use its drafts, so it proposed none).
--
-- Example:
--   SELECT k_zero_reason, request_steps, share_of_k_zero FROM k_zero_reasons
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   k_zero_reason             the reason
--   request_steps             k_zero request-steps with this k_zero_reason (BIGINT)
--   share_of_k_zero           request_steps / all k_zero request-steps of the group (DOUBLE)
--   share_of_request_steps    request_steps / all request-steps of the group (DOUBLE)
--   invalid_tokens            drafts the grammar invalidated (sum of k_invalid; BIGINT)
--   emitted_tokens            tokens emitted by these request-steps (BIGINT)
--
-- k_zero_reasons_between(t0, t1) is the same over t0 <= event_time < t1 (NULL: open end); the
-- view k_zero_reasons is it over all time.
CREATE OR REPLACE MACRO k_zero_reasons_between(t0, t1) AS TABLE
WITH groups AS (
    SELECT
        engine_id,
        model,
        method,
        num_spec_tokens,
        kind,
        k_zero_reason,
        CAST(sum(request_steps) AS BIGINT) AS request_steps,
        CAST(sum(request_steps * k_invalid) AS BIGINT) AS invalid_tokens,
        CAST(sum(emitted) AS BIGINT) AS emitted_tokens,
        sum(sum(request_steps)) OVER (PARTITION BY engine_id, model, method, num_spec_tokens) AS all_steps
    FROM outcome_histogram_between(t0, t1)
    GROUP BY engine_id, model, method, num_spec_tokens, kind, k_zero_reason
)
SELECT
    engine_id,
    model,
    method,
    num_spec_tokens,
    k_zero_reason,
    request_steps,
    request_steps / sum(request_steps) OVER (PARTITION BY engine_id, model, method, num_spec_tokens)
        AS share_of_k_zero,
    request_steps / all_steps AS share_of_request_steps,
    invalid_tokens,
    emitted_tokens
FROM groups
WHERE kind = 'k_zero';

CREATE OR REPLACE VIEW k_zero_reasons AS
FROM k_zero_reasons_between(NULL, NULL)
ORDER BY engine_id, model, method, num_spec_tokens, k_zero_reason;

COMMENT ON MACRO TABLE k_zero_reasons_between IS 'K = 0 request-steps per k_zero_reason: count, share of K = 0 and of all request-steps, invalid and emitted tokens; window t0 <= event_time < t1.';
COMMENT ON VIEW k_zero_reasons IS 'K = 0 request-steps per k_zero_reason: count, share of K = 0 and of all request-steps, invalid and emitted tokens.';
