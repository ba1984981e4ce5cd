-- acceptance_per_request: per-request mean acceptance next to the pooled one, per group.
--
-- vLLM pools: its mean acceptance length is 1 + all accepted tokens / all drafts, so long
-- requests weigh more. The per-request mean averages each request's own value (requests with at
-- least one draft), and can order two configurations differently from the pooled number.
--
-- Example:
--   SELECT engine_id, pooled_mean_acceptance_length, per_request_mean_acceptance_length FROM acceptance_per_request
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   num_requests                          requests with request-steps (BIGINT)
--   num_requests_with_drafts              requests with at least one corrected draft (BIGINT)
--   pooled_mean_acceptance_length         1 + sum(accepted) / sum(drafts), corrected (DOUBLE; NULL when no draft)
--   per_request_mean_acceptance_length    mean over requests of 1 + accepted / drafts, corrected (DOUBLE)
--   pooled_acceptance_rate                sum(accepted) / sum(draft tokens), corrected (DOUBLE)
--   per_request_acceptance_rate           mean over requests of accepted / draft tokens, corrected (DOUBLE)
--   vllm_pooled_mean_acceptance_length    the pooled value as vLLM counts drafts (DOUBLE)
--   vllm_per_request_mean_acceptance_length  the per-request mean as vLLM counts drafts (DOUBLE)
--
-- acceptance_per_request_between(t0, t1) is the same over t0 <= event_time < t1 (NULL: open
-- end); the view acceptance_per_request is it over all time.
CREATE OR REPLACE MACRO acceptance_per_request_between(t0, t1) AS TABLE
SELECT
    engine_id,
    model,
    method,
    num_spec_tokens,
    CAST(count(*) AS BIGINT) AS num_requests,
    CAST(count(*) FILTER (WHERE num_drafts > 0) AS BIGINT) AS num_requests_with_drafts,
    mean_acceptance_length(sum(num_accepted_tokens), sum(num_drafts)) AS pooled_mean_acceptance_length,
    avg(mean_acceptance_length(num_accepted_tokens, num_drafts)) FILTER (WHERE num_drafts > 0)
        AS per_request_mean_acceptance_length,
    acceptance_rate(sum(num_accepted_tokens), sum(num_draft_tokens)) AS pooled_acceptance_rate,
    avg(acceptance_rate(num_accepted_tokens, num_draft_tokens)) FILTER (WHERE num_draft_tokens > 0)
        AS per_request_acceptance_rate,
    mean_acceptance_length(sum(vllm_num_accepted_tokens), sum(vllm_num_drafts)) AS vllm_pooled_mean_acceptance_length,
    avg(mean_acceptance_length(vllm_num_accepted_tokens, vllm_num_drafts)) FILTER (WHERE vllm_num_drafts > 0)
        AS vllm_per_request_mean_acceptance_length
FROM request_acceptance_between(t0, t1)
GROUP BY engine_id, model, method, num_spec_tokens;

CREATE OR REPLACE VIEW acceptance_per_request AS
FROM acceptance_per_request_between(NULL, NULL)
ORDER BY engine_id, model, method, num_spec_tokens;

COMMENT ON MACRO TABLE acceptance_per_request_between IS 'Per group: pooled vs per-request mean acceptance length and rate, corrected and as vLLM counts; window t0 <= event_time < t1.';
COMMENT ON VIEW acceptance_per_request IS 'Per group: pooled vs per-request mean acceptance length and rate, corrected and as vLLM counts.';
