-- request_counts_of_table(source): a table of counts per request a report keeps, as request_counts' rows.
--
-- A table macro: the rows of the table named source, which has request_counts' columns but
-- bucket_index (the counts of each request over its window that `specmetrics report` keeps, from
-- request_counts_from_rollups or request_counts), in one bucket (index 0); no row when source is
-- NULL. The views about single requests (collateral_skips, acceptance_histogram,
-- request_outliers) take their counts per request from request_counts when source is NULL and
-- from here otherwise, so the report computes its sections with their SQL from the counts it read
-- once. They read the two as
--
--   counted AS (FROM request_counts(width_us, t0, t1) WHERE source IS NULL),
--   per_request AS NOT MATERIALIZED (FROM counted UNION ALL FROM request_counts_of_table(source))
--
-- so the counts from the raw rows are made once however often a view reads them, and a report's
-- table is read where it is needed rather than copied first (0.1-0.2 s a view at 8M requests).
--
-- Example:
--   SELECT request_id, num_draft_tokens FROM request_counts_of_table('raw_rollups') WHERE request_id IS NOT NULL ORDER BY num_draft_tokens DESC LIMIT 5
--
-- Columns:
--   bucket_index, engine_id, model, method, num_spec_tokens, request_id, request_steps, skips,
--   collateral_skips, own_skips, lost_draft_tokens, num_drafts, num_draft_tokens, num_accepted_tokens,
--   emitted_tokens, first_event, last_event     as request_counts
CREATE OR REPLACE MACRO request_counts_of_table(source) AS TABLE
-- The name is bound even when source is NULL (the macro then returns nothing): raw_rollups, which
-- every connection has by the time a view reads this, stands in.
SELECT
    0 AS bucket_index, engine_id, model, method, num_spec_tokens, request_id, request_steps, skips, collateral_skips,
    own_skips, lost_draft_tokens, num_drafts, num_draft_tokens, num_accepted_tokens, emitted_tokens, first_event,
    last_event
FROM query_table(coalesce(source, 'raw_rollups'))
WHERE source IS NOT NULL;

COMMENT ON MACRO TABLE request_counts_of_table IS 'The rows of the table named source (request_counts columns but bucket_index, one bucket; none when source is NULL): how a report hands its counts per request to the views.';
