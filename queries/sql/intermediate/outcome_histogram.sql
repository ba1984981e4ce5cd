-- outcome_histogram: request-steps counted by group and by outcome shape.
--
-- One row per distinct (engine_id, model, method, num_spec_tokens, kind, k_zero_reason, k_sched,
-- k_valid, k_invalid, accepted). Every count is at most K, so a group has at most a few hundred
-- rows however many request-steps it holds: the metric views aggregate this instead of
-- re-reading request_steps row by row (and per position).
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group (the dimensions of every metric view)
--   kind, k_zero_reason                         the outcome kind and, for k_zero, the reason
--   k_sched, k_valid, k_invalid, accepted       the outcome's counts
--   is_draft, is_vllm_draft                     as in request_steps (functions of the columns above)
--   request_steps                               number of request-steps with this shape (BIGINT)
--   emitted                                     sum of emitted over them (BIGINT)
CREATE OR REPLACE VIEW outcome_histogram AS
SELECT
    engine_id,
    model,
    method,
    num_spec_tokens,
    kind,
    k_zero_reason,
    k_sched,
    k_valid,
    k_invalid,
    accepted,
    is_draft,
    is_vllm_draft,
    CAST(count(*) AS BIGINT) AS request_steps,
    CAST(sum(emitted) AS BIGINT) AS emitted
FROM request_steps
GROUP BY ALL;

COMMENT ON VIEW outcome_histogram IS 'Request-steps counted per group and outcome shape (kind, reason, k_sched, k_valid, k_invalid, accepted).';
