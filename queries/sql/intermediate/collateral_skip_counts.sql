-- collateral_skip_counts(width_us, t0, t1, source := NULL): collateral_skips per fixed-width time bucket.
--
-- A table macro: one row per time bucket of width_us microseconds (bucket_index =
-- epoch_us(event_time) // width_us; NULL width: one bucket, index 0) and group with request-steps,
-- with the columns of collateral_skips (metrics/collateral_skips.sql, where they are described).
-- Each request's acceptance rate, which estimates what its collateral skips would have accepted,
-- is taken over the whole window t0 <= event_time < t1 (NULL: open end), not per bucket.
-- collateral_skips_between and collateral_skips_timeline select from it. With source, the counts
-- per request are the rows of the table so named (request_counts_of_table), in one bucket.
--
-- Example:
--   SELECT bucket_index, engine_id, collateral_skips FROM collateral_skip_counts(60000000, NULL, NULL)
--
-- Columns:
--   bucket_index                                the time bucket (BIGINT; 0 with a NULL width)
--   engine_id, model, method, num_spec_tokens   the group
--   request_steps, skips, collateral_skips, own_skips, unknown_skips, collateral_share,
--   lost_draft_tokens, estimated_accepted_tokens, estimated_from_group, num_drafts,
--   num_draft_tokens, num_accepted_tokens, acceptance_rate, mean_acceptance_length,
--   acceptance_rate_had_drafted, mean_acceptance_length_had_drafted   as in collateral_skips
CREATE OR REPLACE MACRO collateral_skip_counts(width_us, t0, t1, source := NULL) AS TABLE
WITH counted AS (FROM request_counts(width_us, t0, t1) WHERE source IS NULL),
per_request AS NOT MATERIALIZED (FROM counted UNION ALL FROM request_counts_of_table(source)),
-- Each request's rate over the whole window: with one bucket (a NULL width), its row's own, so
-- no second grouping by request is needed (the costly part with millions of requests).
request_rates AS (
    SELECT engine_id, model, method, num_spec_tokens, request_id,
           acceptance_rate(sum(num_accepted_tokens), sum(num_draft_tokens)) AS rate
    FROM per_request
    WHERE width_us IS NOT NULL
    GROUP BY engine_id, model, method, num_spec_tokens, request_id
),
rated AS (
    SELECT *, acceptance_rate(num_accepted_tokens, num_draft_tokens) AS rate
    FROM per_request
    WHERE width_us IS NULL
    UNION ALL BY NAME
    SELECT *
    FROM per_request
    JOIN request_rates USING (engine_id, model, method, num_spec_tokens, request_id)
    WHERE width_us IS NOT NULL
),
group_rates AS (
    SELECT engine_id, model, method, num_spec_tokens,
           acceptance_rate(sum(num_accepted_tokens), sum(num_draft_tokens)) AS group_rate
    FROM per_request
    GROUP BY engine_id, model, method, num_spec_tokens
),
totals AS (
    SELECT
        bucket_index,
        engine_id,
        model,
        method,
        num_spec_tokens,
        CAST(sum(request_steps) AS BIGINT) AS request_steps,
        CAST(sum(skips) AS BIGINT) AS skips,
        CAST(sum(collateral_skips) AS BIGINT) AS collateral_skips,
        CAST(sum(own_skips) AS BIGINT) AS own_skips,
        CAST(sum(lost_draft_tokens) AS BIGINT) AS lost_draft_tokens,
        sum(would_accept(lost_draft_tokens, rate, group_rate)) FILTER (WHERE collateral_skips > 0)
            AS estimated_accepted_tokens,
        CAST(coalesce(sum(collateral_skips) FILTER (WHERE rate IS NULL), 0) AS BIGINT) AS estimated_from_group,
        CAST(sum(num_drafts) AS BIGINT) AS num_drafts,
        CAST(sum(num_draft_tokens) AS BIGINT) AS num_draft_tokens,
        CAST(sum(num_accepted_tokens) AS BIGINT) AS num_accepted_tokens
    FROM rated
    JOIN group_rates USING (engine_id, model, method, num_spec_tokens)
    GROUP BY ALL
)
SELECT
    bucket_index,
    engine_id,
    model,
    method,
    num_spec_tokens,
    request_steps,
    skips,
    collateral_skips,
    own_skips,
    skips - collateral_skips - own_skips AS unknown_skips,
    skip_share(collateral_skips, skips) AS collateral_share,
    lost_draft_tokens,
    estimated_accepted_tokens,
    estimated_from_group,
    num_drafts,
    num_draft_tokens,
    num_accepted_tokens,
    acceptance_rate(num_accepted_tokens, num_draft_tokens) AS acceptance_rate,
    mean_acceptance_length(num_accepted_tokens, num_drafts) AS mean_acceptance_length,
    acceptance_rate(num_accepted_tokens + coalesce(estimated_accepted_tokens, 0),
                    num_draft_tokens + lost_draft_tokens) AS acceptance_rate_had_drafted,
    mean_acceptance_length(num_accepted_tokens + coalesce(estimated_accepted_tokens, 0),
                           num_drafts + collateral_skips) AS mean_acceptance_length_had_drafted
FROM totals;

COMMENT ON MACRO TABLE collateral_skip_counts IS 'collateral_skips per time bucket of width_us microseconds (NULL: one bucket, index 0), the rate of each request over the whole window t0 <= event_time < t1; or over the table of counts per request named source.';
