-- outcome_histogram: request-steps counted by group and by outcome shape.
--
-- One row per distinct (engine_id, model, method, num_spec_tokens, kind, k_zero_reason, k_sched,
-- k_valid, k_invalid, accepted). Every count is at most K, so a group has at most a few hundred
-- rows however many request-steps it holds: the metric views aggregate this instead of
-- re-reading request_steps row by row (and per position).
--
-- Example:
--   SELECT kind, accepted, sum(request_steps) AS n FROM outcome_histogram GROUP BY ALL ORDER BY ALL
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group (the dimensions of every metric view)
--   kind, k_zero_reason                         the outcome kind and, for k_zero, the reason
--   k_sched, k_valid, k_invalid, accepted       the outcome's counts
--   is_draft, is_vllm_draft                     as in request_steps (functions of the columns above)
--   request_steps                               number of request-steps with this shape (BIGINT)
--   emitted                                     sum of emitted over them (BIGINT)
--
-- outcome_histogram_between(t0, t1) is the same over t0 <= event_time < t1 (NULL: open end);
-- the view outcome_histogram is it over all time.
CREATE OR REPLACE MACRO outcome_histogram_between(t0, t1) AS TABLE
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
FROM request_steps_between(t0, t1)
GROUP BY ALL;

CREATE OR REPLACE VIEW outcome_histogram AS
FROM outcome_histogram_between(NULL, NULL);

COMMENT ON MACRO TABLE outcome_histogram_between IS 'Request-steps counted per group and outcome shape (kind, k_zero_reason, k_sched, k_valid, k_invalid, accepted); window t0 <= event_time < t1.';
COMMENT ON VIEW outcome_histogram IS 'Request-steps counted per group and outcome shape (kind, k_zero_reason, k_sched, k_valid, k_invalid, accepted).';
