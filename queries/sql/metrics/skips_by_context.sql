-- skips_by_context: how often drafting was skipped for length, by context length, per group.
--
-- Context length is the step's batch_max_seq_len: the longest sequence in the batch, the number
-- vLLM compares with the drafter's max length when it decides to skip drafting for the whole
-- batch. Buckets are context_tokens wide (default 256). Shows where drafting stops paying: the
-- skip share rising to 1, and vLLM's acceptance falling with it while the corrected one does not.
-- The skip is decided for the whole batch, so the share is given over request-steps and over
-- steps (step events). Request-steps without a batch_max_seq_len are in the row with NULL bucket
-- bounds.
--
-- Example:
--   SELECT context_start, skip_share, acceptance_rate, vllm_acceptance_rate FROM skips_by_context_between(NULL, NULL, context_tokens := 512)
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   context_start, context_end   the bucket: context_start <= batch_max_seq_len < context_end (INTEGER,
--                                BIGINT: the last bucket may end at 2**31)
--   request_steps                request-steps in the bucket (BIGINT)
--   skipped                      of kind skipped_for_length (BIGINT)
--   skip_share                   skipped / request_steps (DOUBLE)
--   steps                        engine steps (step events) in the bucket (BIGINT)
--   skipped_steps                of them, steps whose drafting was skipped for length (BIGINT)
--   step_skip_share              skipped_steps / steps (DOUBLE)
--   num_drafts                   corrected drafts (BIGINT)
--   num_draft_tokens, num_accepted_tokens            corrected token counts (BIGINT)
--   acceptance_rate              corrected acceptance rate in the bucket (DOUBLE; NULL without draft tokens)
--   vllm_num_draft_tokens, vllm_num_accepted_tokens  token counts as vLLM counts drafts (BIGINT)
--   vllm_acceptance_rate         the rate as vLLM counts it (DOUBLE)
--
-- skips_by_context_between(t0, t1, context_tokens := 256) is the same over t0 <= event_time < t1
-- (NULL: open end); the view skips_by_context is it over all time with 256-token buckets.
CREATE OR REPLACE MACRO skips_by_context_between(t0, t1, context_tokens := 256) AS TABLE
WITH totals AS (
    SELECT
        engine_id,
        model,
        method,
        num_spec_tokens,
        batch_max_seq_len // CASE WHEN CAST(context_tokens AS INTEGER) > 0 THEN CAST(context_tokens AS INTEGER)
                                  ELSE error('skips_by_context: context_tokens must be positive') END AS bucket_index,
        CAST(count(*) AS BIGINT) AS request_steps,
        num_skipped(kind) AS skipped,
        CAST(count(DISTINCT event_id) AS BIGINT) AS steps,
        CAST(count(DISTINCT event_id) FILTER (WHERE is_skipped(kind)) AS BIGINT) AS skipped_steps,
        num_drafts(kind, k_valid) AS num_drafts,
        num_draft_tokens(kind, k_valid) AS num_draft_tokens,
        num_accepted_tokens(kind, k_valid, accepted) AS num_accepted_tokens,
        vllm_num_draft_tokens(kind, k_sched, k_valid) AS vllm_num_draft_tokens,
        vllm_num_accepted_tokens(k_sched, accepted) AS vllm_num_accepted_tokens
    FROM request_steps_between(t0, t1)
    GROUP BY ALL
)
SELECT
    engine_id,
    model,
    method,
    num_spec_tokens,
    CAST(bucket_index * CAST(context_tokens AS INTEGER) AS INTEGER) AS context_start,
    CAST((bucket_index + 1) * CAST(context_tokens AS BIGINT) AS BIGINT) AS context_end,
    request_steps,
    skipped,
    skip_share(skipped, request_steps) AS skip_share,
    steps,
    skipped_steps,
    skip_share(skipped_steps, steps) AS step_skip_share,
    num_drafts,
    num_draft_tokens,
    num_accepted_tokens,
    acceptance_rate(num_accepted_tokens, num_draft_tokens) AS acceptance_rate,
    vllm_num_draft_tokens,
    vllm_num_accepted_tokens,
    acceptance_rate(vllm_num_accepted_tokens, vllm_num_draft_tokens) AS vllm_acceptance_rate
FROM totals;

CREATE OR REPLACE VIEW skips_by_context AS
FROM skips_by_context_between(NULL, NULL)
ORDER BY engine_id, model, method, num_spec_tokens, context_start;

COMMENT ON MACRO TABLE skips_by_context_between IS 'Skip-for-length share and acceptance by context length (batch_max_seq_len) bucket per group (context_tokens := 256); window t0 <= event_time < t1.';
COMMENT ON VIEW skips_by_context IS 'Skip-for-length share and acceptance by context length (batch_max_seq_len, 256-token buckets) per group.';
