-- skip_checks: whether skips for length could be seen, per group, and the skip share where they could.
--
-- A skip for length is seen when the worker's drafter-fit decision reaches the events (the V1 model
-- runner, up to vLLM 0.33). Model Runner V2 never skips for length (see context_caps). Where a V1
-- runner sent no decision (the plugin's worker hook missing or disabled), skips are unknown: the
-- skip share is then NULL, not 0.
--
-- Example:
--   SELECT engine_id, skips, skip_share FROM skip_checks
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   request_steps        all request-steps of the group (BIGINT)
--   observed_steps       request-steps whose skip decision was seen (BIGINT)
--   none_steps           request-steps under a runner that never skips (BIGINT)
--   unobserved_steps     request-steps whose skip decision could not be seen (BIGINT)
--   unreported_steps     request-steps from events before schema 1.3, which do not say (BIGINT)
--   skips                'unknown' when any request-step is unobserved, else 'impossible' when all
--                        are none, else 'observed' ('unreported' when no event says) (VARCHAR)
--   skipped_steps        request-steps skipped for length (BIGINT)
--   skip_share           skipped_steps / request_steps; NULL when skips are unknown (DOUBLE)
--
-- skip_checks_between(t0, t1) is the same over t0 <= event_time < t1 (NULL: open end); the view
-- skip_checks is it over all time.
CREATE OR REPLACE MACRO skip_checks_between(t0, t1) AS TABLE
WITH counts AS (
    SELECT
        engine_id,
        model,
        method,
        num_spec_tokens,
        CAST(count(*) AS BIGINT) AS request_steps,
        CAST(count(*) FILTER (WHERE skip_check = 'observed') AS BIGINT) AS observed_steps,
        CAST(count(*) FILTER (WHERE skip_check = 'none') AS BIGINT) AS none_steps,
        CAST(count(*) FILTER (WHERE skip_check = 'unobserved') AS BIGINT) AS unobserved_steps,
        CAST(count(*) FILTER (WHERE skip_check IS NULL) AS BIGINT) AS unreported_steps,
        num_skipped(kind) AS skipped_steps
    FROM request_steps_between(t0, t1)
    GROUP BY engine_id, model, method, num_spec_tokens
)
SELECT
    engine_id,
    model,
    method,
    num_spec_tokens,
    request_steps,
    observed_steps,
    none_steps,
    unobserved_steps,
    unreported_steps,
    CASE WHEN unobserved_steps > 0 THEN 'unknown'
         WHEN none_steps = request_steps THEN 'impossible'
         WHEN unreported_steps = request_steps THEN 'unreported'
         ELSE 'observed' END AS skips,
    skipped_steps,
    CASE WHEN unobserved_steps = 0 THEN skip_share(skipped_steps, request_steps) END AS skip_share
FROM counts;

CREATE OR REPLACE VIEW skip_checks AS
FROM skip_checks_between(NULL, NULL)
ORDER BY engine_id, model, method, num_spec_tokens;

COMMENT ON MACRO TABLE skip_checks_between IS 'Per group: whether skips for length could be seen, and the skip share where they could (NULL when unknown); window t0 <= event_time < t1.';
COMMENT ON VIEW skip_checks IS 'Per group: whether skips for length could be seen, and the skip share where they could (NULL when unknown).';
