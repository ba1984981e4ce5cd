-- request_acceptance: acceptance per request, under both definitions of a draft.
--
-- One row per request (engine_id, request_id) that has request-steps, with the group it ran in.
-- The per-request means of acceptance_per_request average these rows; pooled metrics (vLLM's way)
-- sum their counts first.
--
-- Example:
--   SELECT request_id, num_drafts, vllm_num_drafts FROM request_acceptance ORDER BY vllm_num_drafts - num_drafts DESC LIMIT 10
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   request_id                  vLLM request id (unique within an engine)
--   request_steps               request-steps of the request (BIGINT)
--   num_drafts                  corrected drafts (BIGINT)
--   num_draft_tokens            sum of k_valid over them (BIGINT)
--   num_accepted_tokens         sum of accepted over them (BIGINT)
--   vllm_num_drafts             drafts as vLLM counts them, k_sched > 0 (BIGINT)
--   vllm_num_draft_tokens       sum of vllm_draft_tokens over them (BIGINT)
--   vllm_num_accepted_tokens    sum of accepted over them (BIGINT)
--   emitted_tokens              tokens committed for the request in its request-steps (BIGINT)
--   first_event, last_event     the first and last event time of the request (TIMESTAMP)
--
-- request_acceptance_between(t0, t1) is the same over t0 <= event_time < t1 (NULL: open end);
-- the view request_acceptance is it over all time.
CREATE OR REPLACE MACRO request_acceptance_between(t0, t1) AS TABLE
SELECT
    engine_id,
    model,
    method,
    num_spec_tokens,
    request_id,
    CAST(count(*) AS BIGINT) AS request_steps,
    num_drafts(kind, k_valid) AS num_drafts,
    num_draft_tokens(kind, k_valid) AS num_draft_tokens,
    num_accepted_tokens(kind, k_valid, accepted) AS num_accepted_tokens,
    vllm_num_drafts(k_sched) AS vllm_num_drafts,
    vllm_num_draft_tokens(kind, k_sched, k_valid) AS vllm_num_draft_tokens,
    vllm_num_accepted_tokens(k_sched, accepted) AS vllm_num_accepted_tokens,
    CAST(sum(emitted) AS BIGINT) AS emitted_tokens,
    min(event_time) AS first_event,
    max(event_time) AS last_event
FROM request_steps_between(t0, t1)
GROUP BY engine_id, model, method, num_spec_tokens, request_id;

CREATE OR REPLACE VIEW request_acceptance AS
FROM request_acceptance_between(NULL, NULL);

COMMENT ON MACRO TABLE request_acceptance_between IS 'Per request: request-steps, corrected and vLLM drafts, draft tokens and accepted tokens, tokens emitted, first and last event; window t0 <= event_time < t1.';
COMMENT ON VIEW request_acceptance IS 'Per request: request-steps, corrected and vLLM drafts, draft tokens and accepted tokens, tokens emitted, first and last event.';
