-- all_request_steps: one row per request-step, typed; the rows of steps the plugin did not observe too.
--
-- Source: raw_request_steps (the Parquet tree DATADIR/dt=YYYY-MM-DD/hour=HH/*.parquet, one row
-- per request whose drafts were verified, or which got no draft, at one engine step; see
-- schemas/arrow.py). Counts are widened from SMALLINT to INTEGER so sums cannot overflow.
--
-- Besides the request-steps, one row of kind 'vllm_only' per step whose outcomes the plugin did not
-- see (schema 1.8), recorded from vLLM's stat logger with vLLM's own counters only (request_id '*',
-- every count 0). Only vllm_only_steps reads those; the metrics read request_steps, which leaves
-- them out.
--
-- Example:
--   SELECT vllm_only, count(*) AS steps FROM all_request_steps WHERE kind = 'vllm_only' GROUP BY ALL
--
-- Columns:
--   kind                             as in request_steps, and 'vllm_only': a step the plugin did not see
--   vllm_only                        on the rows of kind 'vllm_only': why the plugin saw none of the
--                                    step's outcomes: 'step_hook_off' (SPECMETRICS_STEP_HOOK=false),
--                                    'step_hook_not_installed' (the running vLLM's scheduler does not
--                                    match the hook), 'step_hook_disabled' (observing the outcomes
--                                    raised at run time and the hook stopped); NULL otherwise
--   every other column               as in request_steps
CREATE OR REPLACE VIEW all_request_steps AS
SELECT
    CAST(schema_version AS VARCHAR) AS schema_version,
    CAST(event_id AS VARCHAR) AS event_id,
    CAST(engine_id AS VARCHAR) AS engine_id,
    CAST(engine_instance AS VARCHAR) AS engine_instance,
    CAST(dp_rank AS INTEGER) AS dp_rank,
    CAST(model AS VARCHAR) AS model,
    CAST(vllm_version AS VARCHAR) AS vllm_version,
    CAST(method AS VARCHAR) AS method,
    CAST(num_spec_tokens AS INTEGER) AS num_spec_tokens,
    CAST(drafter_max_len AS INTEGER) AS drafter_max_len,
    CAST(step_index AS BIGINT) AS step_index,
    CAST(event_time AS TIMESTAMP) AS event_time,
    CAST(dt AS DATE) AS dt,
    CAST(hour AS INTEGER) AS hour,
    CAST(batch_max_seq_len AS INTEGER) AS batch_max_seq_len,
    CAST(drafts_verified AS INTEGER) AS drafts_verified,
    CAST(max_model_len AS INTEGER) AS max_model_len,
    CAST(context_cap_from AS INTEGER) AS context_cap_from,
    CAST(skip_check AS VARCHAR) AS skip_check,
    CAST(log_source AS VARCHAR) AS log_source,
    CAST(log_partition AS INTEGER) AS log_partition,
    CAST(log_offset AS BIGINT) AS log_offset,
    CAST(request_id AS VARCHAR) AS request_id,
    CAST(kind AS VARCHAR) AS kind,
    CAST(k_zero_reason AS VARCHAR) AS k_zero_reason,
    CAST(k_sched AS INTEGER) AS k_sched,
    CAST(k_valid AS INTEGER) AS k_valid,
    CAST(k_invalid AS INTEGER) AS k_invalid,
    CAST(accepted AS INTEGER) AS accepted,
    CAST(emitted AS INTEGER) AS emitted,
    CAST(seq_len AS INTEGER) AS seq_len,
    CAST(vllm_num_drafts AS INTEGER) AS vllm_num_drafts,
    CAST(vllm_num_draft_tokens AS INTEGER) AS vllm_num_draft_tokens,
    CAST(vllm_num_accepted_tokens AS INTEGER) AS vllm_num_accepted_tokens,
    CAST(vllm_accepted_per_pos AS INTEGER[]) AS vllm_accepted_per_pos,
    CAST(vllm_counts_missing AS VARCHAR) AS vllm_counts_missing,
    CAST(vllm_request_histogram AS INTEGER[]) AS vllm_request_histogram,
    CAST(vllm_request_draft_tokens AS INTEGER) AS vllm_request_draft_tokens,
    CAST(vllm_request_accepted_per_step AS INTEGER[]) AS vllm_request_accepted_per_step,
    CAST(vllm_request_drafted_per_step AS INTEGER[]) AS vllm_request_drafted_per_step,
    CAST(vllm_only AS VARCHAR) AS vllm_only,
    is_draft(kind, k_valid) AS is_draft,
    is_vllm_draft(k_sched) AS is_vllm_draft
-- Files written before schema 1.1 have no drafts_verified column, before 1.3 none of the three
-- after it, before 1.5 no seq_len, before 1.6 none of vLLM's own counters, before 1.7 none of vLLM's
-- per-request metrics, before 1.8 no vllm_only, before 1.9 no log_source: BY NAME fills them with NULL.
FROM (FROM raw_request_steps UNION ALL BY NAME
      SELECT CAST(NULL AS INTEGER) AS drafts_verified, CAST(NULL AS INTEGER) AS max_model_len,
             CAST(NULL AS INTEGER) AS context_cap_from, CAST(NULL AS VARCHAR) AS skip_check,
             CAST(NULL AS INTEGER) AS seq_len, CAST(NULL AS INTEGER) AS vllm_num_drafts,
             CAST(NULL AS INTEGER) AS vllm_num_draft_tokens, CAST(NULL AS INTEGER) AS vllm_num_accepted_tokens,
             CAST(NULL AS INTEGER[]) AS vllm_accepted_per_pos, CAST(NULL AS VARCHAR) AS vllm_counts_missing,
             CAST(NULL AS INTEGER[]) AS vllm_request_histogram, CAST(NULL AS INTEGER) AS vllm_request_draft_tokens,
             CAST(NULL AS INTEGER[]) AS vllm_request_accepted_per_step,
             CAST(NULL AS INTEGER[]) AS vllm_request_drafted_per_step, CAST(NULL AS VARCHAR) AS vllm_only,
             CAST(NULL AS VARCHAR) AS log_source
      WHERE false);

COMMENT ON VIEW all_request_steps IS 'Every stored row typed: the request-steps, and one row of kind vllm_only per step the plugin did not see (the own counters of vLLM only).';
