-- request_counts_or_table(width_us, t0, t1, source): request_counts, or a table of its rows a report keeps.
--
-- A table macro: request_counts(width_us, t0, t1) when source is NULL; when source names a table
-- with request_counts' columns but bucket_index (the counts of each request over its window that
-- `specmetrics report` keeps, from request_counts_from_rollups or request_counts), that table's
-- rows in one bucket (index 0; width_us, t0 and t1 are not used). The views about single requests
-- (collateral_skips, acceptance_histogram, request_outliers) read it, so the report computes its
-- sections with their SQL from the counts it read once.
--
-- Example:
--   SELECT request_id, num_draft_tokens FROM request_counts_or_table(NULL, NULL, NULL, NULL) ORDER BY num_draft_tokens DESC LIMIT 5
--
-- Columns:
--   bucket_index, engine_id, model, method, num_spec_tokens, request_id, request_steps, skips,
--   collateral_skips, own_skips, lost_draft_tokens, num_drafts, num_draft_tokens, num_accepted_tokens,
--   emitted_tokens, first_event, last_event     as request_counts
CREATE OR REPLACE MACRO request_counts_or_table(width_us, t0, t1, source) AS TABLE
FROM request_counts(width_us, t0, t1)
WHERE source IS NULL
UNION ALL
-- The name is bound even when source is NULL (the branch then reads nothing): raw_rollups, which
-- every connection has by the time a view reads this, stands in.
SELECT
    0 AS bucket_index, engine_id, model, method, num_spec_tokens, request_id, request_steps, skips, collateral_skips,
    own_skips, lost_draft_tokens, num_drafts, num_draft_tokens, num_accepted_tokens, emitted_tokens, first_event,
    last_event
FROM query_table(coalesce(source, 'raw_rollups'))
WHERE source IS NOT NULL;

COMMENT ON MACRO TABLE request_counts_or_table IS 'request_counts(width_us, t0, t1), or with source the rows of the table so named (request_counts columns but bucket_index, one bucket): how a report hands its counts per request to the views.';
