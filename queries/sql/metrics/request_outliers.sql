-- request_outliers: requests whose own acceptance is far from their group's.
--
-- A request with at least `min_drafts` corrected drafts whose corrected acceptance rate is at
-- least `margin` below (low) or above (high) its group's pooled rate: the ones to read first when
-- output looks garbled (low) or stuck in a loop (high). The group's rate counts every request of
-- the group, the outlier's included.
--
-- Example:
--   SELECT request_id, direction, acceptance_rate, group_acceptance_rate, request_steps FROM request_outliers
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   request_id              vLLM request id
--   direction               'low' or 'high'
--   acceptance_rate         the request's corrected acceptance rate (DOUBLE)
--   group_acceptance_rate   the group's pooled corrected acceptance rate (DOUBLE)
--   difference              acceptance_rate - group_acceptance_rate (DOUBLE)
--   num_drafts, num_draft_tokens, num_accepted_tokens   the request's corrected counts (BIGINT)
--   request_steps           the request's request-steps (BIGINT)
--   emitted_tokens          tokens committed for the request in its request-steps (BIGINT)
--   first_event, last_event   the first and last event time of the request (TIMESTAMP)
--
-- request_outliers_between(t0, t1, margin := 0.3, min_drafts := 8, source := NULL) is the same
-- over t0 <= event_time < t1 (NULL: open end) with those thresholds, or over the counts per request
-- of the table named source (request_counts_of_table: how `specmetrics report` finds its
-- outliers); the view request_outliers is it over all time with the defaults.
CREATE OR REPLACE MACRO request_outliers_between(t0, t1, margin := 0.3, min_drafts := 8, source := NULL) AS TABLE
WITH counted AS (FROM request_counts(NULL, t0, t1) WHERE source IS NULL),
per_request AS NOT MATERIALIZED (FROM counted UNION ALL FROM request_counts_of_table(source)),
-- each group's pooled rate, joined: a window over millions of requests is several times slower
group_rates AS (
    SELECT
        engine_id,
        model,
        method,
        num_spec_tokens,
        acceptance_rate(sum(num_accepted_tokens), sum(num_draft_tokens)) AS group_acceptance_rate
    FROM per_request
    GROUP BY engine_id, model, method, num_spec_tokens
),
rated AS (
    SELECT *, acceptance_rate(num_accepted_tokens, num_draft_tokens) AS acceptance_rate
    FROM per_request
    JOIN group_rates USING (engine_id, model, method, num_spec_tokens)
)
SELECT
    engine_id,
    model,
    method,
    num_spec_tokens,
    request_id,
    outlier_direction(acceptance_rate, group_acceptance_rate) AS direction,
    acceptance_rate,
    group_acceptance_rate,
    acceptance_rate - group_acceptance_rate AS difference,
    num_drafts,
    num_draft_tokens,
    num_accepted_tokens,
    request_steps,
    emitted_tokens,
    first_event,
    last_event
FROM rated
WHERE is_outlier(acceptance_rate, group_acceptance_rate, num_drafts, margin, min_drafts);

CREATE OR REPLACE VIEW request_outliers AS
FROM request_outliers_between(NULL, NULL)
ORDER BY engine_id, model, method, num_spec_tokens, abs(difference) DESC, request_id;

COMMENT ON MACRO TABLE request_outliers_between IS 'Requests with at least min_drafts (8) corrected drafts whose acceptance rate is margin (0.3) or more below or above the pooled rate of their group; window t0 <= event_time < t1.';
COMMENT ON VIEW request_outliers IS 'Requests with at least 8 corrected drafts whose acceptance rate is 0.3 or more below or above the pooled rate of their group.';
