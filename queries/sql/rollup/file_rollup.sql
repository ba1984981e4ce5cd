-- file_rollup: the rollup of the rows of raw_request_steps, as a rollup file stores it.
--
-- Request-steps counted per group, minute, 256-token context bucket (batch_max_seq_len), outcome
-- shape and audit verdict of their step (audited_request_steps), with the first and last
-- event time among them. A step's rows lie in one data file, so a file's rollup holds every
-- verdict it needs. queries/rollup.py writes the rollup of a
-- data file (DATADIR/_rollup/dt=YYYY-MM-DD/hour=HH/<the data file's name>) by pointing
-- raw_request_steps at that one file and storing this view, sorted; `specmetrics verify`
-- recomputes it the same way and compares. Over a whole tree it is the rollup of every file. Its
-- columns are request_steps' typed ones, so a rollup and its recomputation compare equal;
-- report_counts_from_rollups reads the stored rollups (the source view raw_rollups).
--
-- Example:
--   SELECT minute, sum(request_steps) AS request_steps FROM file_rollup GROUP BY minute ORDER BY minute
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   minute                                      the minute of event_time (TIMESTAMP, UTC)
--   context_start                               batch_max_seq_len rounded down to a multiple of 256
--                                               (INTEGER; NULL when unknown)
--   kind, k_zero_reason                         the outcome kind and, for k_zero, the reason
--   k_sched, k_valid, k_invalid, accepted       the outcome's counts
--   vllm_counts_differ                          whether the step's rebuilt counts differ from vLLM's own
--                                               (NULL: the step has none)
--   request_steps                               request-steps in the row (BIGINT)
--   first_event, last_event                     the first and last event_time among them
CREATE OR REPLACE VIEW file_rollup AS
SELECT
    engine_id,
    model,
    method,
    num_spec_tokens,
    make_timestamp(epoch_us(event_time) // 60000000 * 60000000) AS minute,
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
GROUP BY ALL;

COMMENT ON VIEW file_rollup IS 'Request-steps per group, minute, 256-token context bucket, outcome shape and audit verdict: the rows of a stored rollup (of the data file raw_request_steps reads).';
