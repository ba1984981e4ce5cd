-- outcome_shares: what happened to speculation, as shares of request-steps, per group.
--
-- One row per group, kind and k_zero_reason that has request-steps. Shows how often drafting was
-- skipped for length, how often drafts broke the grammar, and how often nothing was scheduled
-- (k_zero) and why.
--
-- Example:
--   SELECT kind, k_zero_reason, share FROM outcome_shares ORDER BY share DESC
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   kind             'drafted' | 'skipped_for_length' | 'grammar_invalid' | 'k_zero' | 'grammar_rejected'
--   k_zero_reason    NULL unless kind = 'k_zero'
--   request_steps    request-steps of this kind (and k_zero_reason) in the group (BIGINT)
--   share            request_steps / all request-steps of the group (DOUBLE; sums to 1 per group)
--   share_of_kind    request_steps / request-steps of this kind in the group (DOUBLE; sums to 1 per
--                    group and kind; 1 for every kind but k_zero)
--
-- outcome_shares_between(t0, t1) is the same over t0 <= event_time < t1 (NULL: open end);
-- the view outcome_shares is it over all time.
CREATE OR REPLACE MACRO outcome_shares_between(t0, t1) AS TABLE
WITH counts AS (
    SELECT
        engine_id,
        model,
        method,
        num_spec_tokens,
        kind,
        k_zero_reason,
        CAST(sum(request_steps) AS BIGINT) AS request_steps
    FROM outcome_histogram_between(t0, t1)
    GROUP BY engine_id, model, method, num_spec_tokens, kind, k_zero_reason
)
SELECT
    engine_id,
    model,
    method,
    num_spec_tokens,
    kind,
    k_zero_reason,
    request_steps,
    request_steps / sum(request_steps) OVER (PARTITION BY engine_id, model, method, num_spec_tokens) AS share,
    request_steps / sum(request_steps) OVER (PARTITION BY engine_id, model, method, num_spec_tokens, kind)
        AS share_of_kind
FROM counts;

CREATE OR REPLACE VIEW outcome_shares AS
FROM outcome_shares_between(NULL, NULL)
ORDER BY engine_id, model, method, num_spec_tokens, kind, k_zero_reason;

COMMENT ON MACRO TABLE outcome_shares_between IS 'Share of request-steps per outcome kind and k_zero_reason, of the group and of the kind; window t0 <= event_time < t1.';
COMMENT ON VIEW outcome_shares IS 'Share of request-steps per outcome kind and k_zero_reason, of the group and of the kind.';
