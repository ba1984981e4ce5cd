-- acceptance_vllm: acceptance as vLLM 0.32.0 reports it, per group, bugs included.
--
-- Reproduces vllm:spec_decode_num_drafts, _num_draft_tokens and _num_accepted_tokens: a request-step
-- counts as a draft when k_sched > 0, whatever its kind, so placeholder drafts of steps skipped for
-- length and grammar_invalid steps whose drafts were all invalid (k_valid = 0) are counted as
-- drafts. Compare with acceptance (corrected). Every group with request-steps has a row, with zero
-- counts and NULL ratios when it has no draft.
--
-- Example:
--   SELECT engine_id, acceptance_rate, mean_acceptance_length FROM acceptance_vllm
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   num_drafts              request-steps with k_sched > 0 (BIGINT)
--   num_draft_tokens        sum of vllm_draft_tokens over them: k_valid, the verified invalid draft of
--                           grammar_rejected included (BIGINT)
--   num_accepted_tokens     sum of accepted over them (BIGINT)
--   acceptance_rate         num_accepted_tokens / num_draft_tokens (DOUBLE; NULL when no draft token)
--   mean_acceptance_length  1 + num_accepted_tokens / num_drafts (DOUBLE; NULL when no draft)
--
-- acceptance_vllm_between(t0, t1) is the same over t0 <= event_time < t1 (NULL: open end);
-- the view acceptance_vllm is it over all time.
CREATE OR REPLACE MACRO acceptance_vllm_between(t0, t1) AS TABLE
SELECT * EXCLUDE (definition)
FROM acceptance_by_definition_between(t0, t1)
WHERE definition = 'vllm';

CREATE OR REPLACE VIEW acceptance_vllm AS
FROM acceptance_vllm_between(NULL, NULL)
ORDER BY engine_id, model, method, num_spec_tokens;

COMMENT ON MACRO TABLE acceptance_vllm_between IS 'Acceptance as vLLM 0.32.0 counts it (any request-step with k_sched > 0 is a draft), bugs included; window t0 <= event_time < t1.';
COMMENT ON VIEW acceptance_vllm IS 'Acceptance as vLLM 0.32.0 counts it (any request-step with k_sched > 0 is a draft), bugs included.';
