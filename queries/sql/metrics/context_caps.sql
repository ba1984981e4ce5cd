-- context_caps: the context each engine served, and where vLLM lowered it to the drafter's.
--
-- Model Runner V2 (vLLM 0.33 with V2, always from 0.34) cannot skip drafting for sequences longer
-- than the drafter's max model length, so at start-up vLLM lowers the target's max_model_len to the
-- drafter's, with one log line: a model served for 131,072 tokens becomes a 2,048-token server, and
-- longer requests are refused. One row per engine, model, vLLM version and method whose events
-- report the served length (schema 1.3 on).
--
-- Example:
--   SELECT engine_id, summary FROM context_caps WHERE capped
--
-- Columns:
--   engine_id, model, vllm_version, method   the engine and what it ran
--   max_model_len       the target's max model length as served (INTEGER)
--   context_cap_from    what it was before vLLM lowered it (INTEGER; NULL when not lowered)
--   drafter_max_len     the drafter's max model length (INTEGER; NULL when unknown)
--   capped              vLLM lowered the target's context to the drafter's (BOOLEAN)
--   summary             e.g. 'context capped from 131,072 to 2,048 by the drafter' (VARCHAR)
--   first_event_time, last_event_time   the engine's first and last step event seen (TIMESTAMP)
--
-- context_caps_between(t0, t1) is the same over t0 <= event_time < t1 (NULL: open end); the view
-- context_caps is it over all time.
CREATE OR REPLACE MACRO context_caps_between(t0, t1) AS TABLE
SELECT
    engine_id,
    model,
    vllm_version,
    method,
    max_model_len,
    context_cap_from,
    max(drafter_max_len) AS drafter_max_len,
    context_cap_from IS NOT NULL AS capped,
    CASE WHEN context_cap_from IS NOT NULL
         THEN format('context capped from {:,} to {:,} by the drafter', context_cap_from, max_model_len)
         ELSE format('context {:,}, not capped', max_model_len) END AS summary,
    min(event_time) AS first_event_time,
    max(event_time) AS last_event_time
FROM request_steps_between(t0, t1)
WHERE max_model_len IS NOT NULL
GROUP BY engine_id, model, vllm_version, method, max_model_len, context_cap_from;

CREATE OR REPLACE VIEW context_caps AS
FROM context_caps_between(NULL, NULL)
ORDER BY engine_id, model, vllm_version, method, max_model_len, context_cap_from;

COMMENT ON MACRO TABLE context_caps_between IS 'Per engine: the target context served, and the length before vLLM lowered it for the drafter; window t0 <= event_time < t1.';
COMMENT ON VIEW context_caps IS 'Per engine: the target context served, and the length before vLLM lowered it for the drafter.';
