-- outcome_shares: what happened to speculation, as shares of request-steps, per group.
--
-- One row per group, kind and k_zero_reason that has request-steps. Shows how often drafting was
-- skipped for length, how often drafts broke the grammar, and how often nothing was scheduled
-- (k_zero) and why.
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   kind             'drafted' | 'skipped_for_length' | 'grammar_invalid' | 'k_zero'
--   k_zero_reason    NULL unless kind = 'k_zero'
--   request_steps    request-steps of this kind (and reason) in the group (BIGINT)
--   share            request_steps / all request-steps of the group (DOUBLE; sums to 1 per group)
--   share_of_kind    request_steps / request-steps of this kind in the group (DOUBLE; sums to 1 per
--                    group and kind; 1 for every kind but k_zero)
CREATE OR REPLACE VIEW outcome_shares AS
WITH counts AS (
    SELECT
        engine_id,
        model,
        method,
        num_spec_tokens,
        kind,
        k_zero_reason,
        CAST(sum(request_steps) AS BIGINT) AS request_steps
    FROM outcome_histogram
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
FROM counts
ORDER BY engine_id, model, method, num_spec_tokens, kind, k_zero_reason;

COMMENT ON VIEW outcome_shares IS 'Share of request-steps per outcome kind and k_zero reason, of the group and of the kind.';
