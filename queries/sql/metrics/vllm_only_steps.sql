-- vllm_only_steps: vLLM's own numbers where the plugin saw no outcome.
--
-- When the scheduler hook is off (SPECMETRICS_STEP_HOOK=false) or cannot install on the running
-- vLLM, the plugin's stat logger (vLLM's vllm.stat_logger_plugins, in the API server process)
-- still records each step's SpecDecodingStats, as a row of kind 'vllm_only' (schema 1.8); where
-- the hook stopped itself at run time (observing the outcomes raised), the engine core's hook
-- sends vLLM's counters alone from then on, as the same kind of row. Those
-- steps are vLLM's history only: what vLLM reported, with its bugs; the corrected metrics cannot
-- count them (every other view leaves them out). One row per engine, vLLM version, model, method
-- and reason with such steps.
--
-- Example:
--   SELECT engine_id, vllm_only, steps, acceptance_rate FROM vllm_only_steps
--
-- Columns:
--   engine_id, vllm_version, model, method   the group
--   vllm_only               why the plugin saw no outcome: 'step_hook_off', 'step_hook_not_installed',
--                            'step_hook_disabled'
--   steps                    steps recorded with vLLM's counters only (BIGINT)
--   first_event_time, last_event_time   when the first and the last of them were recorded
--   num_drafts               vLLM's own drafts over them (BIGINT)
--   num_draft_tokens         vLLM's own draft tokens (BIGINT)
--   num_accepted_tokens      vLLM's own accepted tokens (BIGINT)
--   acceptance_rate          num_accepted_tokens / num_draft_tokens, as vLLM reports it (DOUBLE; NULL
--                            when no draft token)
--   mean_acceptance_length   1 + num_accepted_tokens / num_drafts (DOUBLE; NULL when no draft)
--
-- vllm_only_steps_between(t0, t1) is the same over t0 <= event_time < t1 (NULL: open end); the
-- view vllm_only_steps is it over all time.
CREATE OR REPLACE MACRO vllm_only_steps_between(t0, t1) AS TABLE
SELECT
    engine_id, vllm_version, model, method, vllm_only,
    CAST(count(*) AS BIGINT) AS steps,
    min(event_time) AS first_event_time,
    max(event_time) AS last_event_time,
    CAST(sum(vllm_num_drafts) AS BIGINT) AS num_drafts,
    CAST(sum(vllm_num_draft_tokens) AS BIGINT) AS num_draft_tokens,
    CAST(sum(vllm_num_accepted_tokens) AS BIGINT) AS num_accepted_tokens,
    acceptance_rate(sum(vllm_num_accepted_tokens), sum(vllm_num_draft_tokens)) AS acceptance_rate,
    mean_acceptance_length(sum(vllm_num_accepted_tokens), sum(vllm_num_drafts)) AS mean_acceptance_length
FROM all_request_steps
WHERE kind = 'vllm_only' AND in_window(event_time, dt, hour, t0, t1)
GROUP BY engine_id, vllm_version, model, method, vllm_only;

CREATE OR REPLACE VIEW vllm_only_steps AS
FROM vllm_only_steps_between(NULL, NULL)
ORDER BY engine_id, vllm_version, model, method, vllm_only;

COMMENT ON MACRO TABLE vllm_only_steps_between IS 'The own counters of vLLM for the steps the plugin did not observe (hook off or not installed), nothing corrected; window t0 <= event_time < t1.';
COMMENT ON VIEW vllm_only_steps IS 'The own counters of vLLM for the steps the plugin did not observe (hook off or not installed), nothing corrected.';
