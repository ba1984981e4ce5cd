-- file_rollup: the rollup of the rows of raw_request_steps, as a rollup file stores it.
--
-- Two kinds of rows, told apart by request_id. Rows per outcome shape (request_id NULL):
-- request-steps counted per group, minute, 256-token context bucket (batch_max_seq_len), outcome
-- shape and audit verdict of their step (audited_request_steps), with the first and last event
-- time among them; a step's rows lie in one data file, so a file's rollup holds every verdict it
-- needs. Rows per request (request_id set): each request's counts per group and minute
-- (request_counts), which add up exactly across minutes and files, so the sections of a report
-- about single requests read them instead of the raw rows. queries/rollup.py writes the rollup of
-- a data file (DATADIR/_rollup/dt=YYYY-MM-DD/hour=HH/<the data file's name>) by pointing
-- raw_request_steps at that one file and storing this view, sorted, each kind in row groups of
-- its own (a reader of one kind skips the other's); `specmetrics verify` recomputes it the same
-- way and compares. Over a whole table it is the rollup of every file. Its columns are
-- request_steps' typed ones, so a rollup and its recomputation compare equal;
-- report_counts_from_rollups and request_counts_from_rollups read the stored rollups (the source
-- view raw_rollups).
--
-- Example:
--   SELECT minute, sum(request_steps) AS request_steps FROM file_rollup WHERE request_id IS NULL GROUP BY minute ORDER BY minute
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   minute                                      the minute of event_time (TIMESTAMP, UTC)
--   request_id                                  NULL in a row per outcome shape; the request in a row
--                                               per request
--   context_start                               batch_max_seq_len rounded down to a multiple of 256
--                                               (INTEGER; NULL when unknown or in a row per request)
--   kind, k_zero_reason                         the outcome kind and, for k_zero, the reason
--   k_sched, k_valid, k_invalid, accepted       the outcome's counts
--   vllm_counts_differ                          whether the step's rebuilt counts differ from vLLM's own
--                                               (NULL: the step has none)
--   request_steps                               request-steps in the row (BIGINT)
--   first_event, last_event                     the first and last event_time among them
--   skips, collateral_skips, own_skips, lost_draft_tokens, num_drafts, num_draft_tokens,
--   num_accepted_tokens, emitted_tokens         a row per request: its counts (request_counts);
--                                               NULL in a row per outcome shape
CREATE OR REPLACE VIEW file_rollup AS
SELECT
    engine_id,
    model,
    method,
    num_spec_tokens,
    make_timestamp(epoch_us(event_time) // 60000000 * 60000000) AS minute,
    CAST(NULL AS VARCHAR) AS request_id,
    CAST(batch_max_seq_len // 256 * 256 AS INTEGER) AS context_start,
    kind,
    k_zero_reason,
    k_sched,
    k_valid,
    k_invalid,
    accepted,
    vllm_counts_differ,
    CAST(count(*) AS BIGINT) AS request_steps,
    min(event_time) AS first_event,
    max(event_time) AS last_event
FROM audited_request_steps(NULL, NULL)
GROUP BY ALL
UNION ALL BY NAME
SELECT
    engine_id,
    model,
    method,
    num_spec_tokens,
    make_timestamp(bucket_index * 60000000) AS minute,
    request_id,
    request_steps,
    first_event,
    last_event,
    skips,
    collateral_skips,
    own_skips,
    lost_draft_tokens,
    num_drafts,
    num_draft_tokens,
    num_accepted_tokens,
    emitted_tokens
FROM request_counts(60000000, NULL, NULL);

COMMENT ON VIEW file_rollup IS 'The rows of a stored rollup (of the data file raw_request_steps reads): request-steps per group, minute, 256-token context bucket, outcome shape and audit verdict (request_id NULL), and the counts of each request per group and minute (request_id set).';
