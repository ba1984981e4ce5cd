-- acceptance_vllm: acceptance as vLLM 0.32.0 reports it, per group, bugs included.
--
-- Reproduces vllm:spec_decode_num_drafts, _num_draft_tokens and _num_accepted_tokens: a request-step
-- counts as a draft when k_sched > 0, whatever its kind, so placeholder drafts of steps skipped for
-- length and grammar_invalid steps whose drafts were all invalid (k_valid = 0) are counted as
-- drafts. Compare with acceptance (corrected). Every group with request-steps has a row, with zero
-- counts and NULL ratios when it has no draft.
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   num_drafts              request-steps with k_sched > 0 (BIGINT)
--   num_draft_tokens        sum of k_valid over them (BIGINT)
--   num_accepted_tokens     sum of accepted over them (BIGINT)
--   acceptance_rate         num_accepted_tokens / num_draft_tokens (DOUBLE; NULL when no draft token)
--   mean_acceptance_length  1 + num_accepted_tokens / num_drafts (DOUBLE; NULL when no draft)
CREATE OR REPLACE VIEW acceptance_vllm AS
SELECT * EXCLUDE (definition)
FROM acceptance_by_definition
WHERE definition = 'vllm'
ORDER BY engine_id, model, method, num_spec_tokens;

COMMENT ON VIEW acceptance_vllm IS 'Acceptance as vLLM 0.32.0 counts it (any request-step with k_sched > 0 is a draft), bugs included.';
