-- live_histogram: the request-steps a live process counted, as the views' outcome histogram.
--
-- Only for the live endpoint's connection (queries/live.py), never in the catalog over a tree.
-- The live metrics count the request-steps an ingester validates by outcome shape into the table
-- live_histogram (outcome_histogram's columns but is_draft and is_vllm_draft); this file makes it
-- the outcome_histogram_between that the views read, so the live counters come from the views'
-- own SQL. The window is ignored: the histogram holds what the process counted since it started.
--
-- Example:
--   SELECT kind, sum(request_steps) FROM outcome_histogram_between(NULL, NULL) GROUP BY kind
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   kind, k_zero_reason, k_sched, k_valid, k_invalid, accepted   the outcome shape
--   is_draft, is_vllm_draft     the shape under both definitions of a draft (BOOLEAN)
--   request_steps               request-steps of the shape (BIGINT)
--   emitted                     tokens they emitted (BIGINT)
CREATE OR REPLACE MACRO outcome_histogram_between(t0, t1) AS TABLE
SELECT *, is_draft(kind, k_valid) AS is_draft, is_vllm_draft(k_sched) AS is_vllm_draft
FROM live_histogram;

COMMENT ON MACRO TABLE outcome_histogram_between IS 'The live histogram of request-steps by group and outcome shape (the window is ignored).';

-- The view of the same name as in the catalog: outcome_counts names it in its branch for a table.
CREATE OR REPLACE VIEW outcome_histogram AS
FROM outcome_histogram_between(NULL, NULL);
