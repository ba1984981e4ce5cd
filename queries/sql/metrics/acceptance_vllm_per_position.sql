-- acceptance_vllm_per_position: vLLM 0.32.0's per-position accepted-token counter, per group.
--
-- Reproduces vllm:spec_decode_num_accepted_tokens_per_pos exactly, bugs included: at position i
-- (0-based, vLLM's `position` label) it counts the request-steps with k_sched > 0 (vLLM drafts,
-- see acceptance_vllm) that accepted at least i + 1 tokens. One row per group with request-steps
-- and per position 0 .. num_spec_tokens - 1.
--
-- Example:
--   SELECT position, acceptance_rate FROM acceptance_vllm_per_position ORDER BY engine_id, position
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   position                     0-based draft position i (INTEGER)
--   num_accepted_tokens_per_pos  vLLM drafts with accepted >= i + 1 (BIGINT)
--   num_drafts                   vLLM drafts in the group (BIGINT), as in acceptance_vllm
--   acceptance_rate              num_accepted_tokens_per_pos / num_drafts: the per-position rate vLLM
--                                logs (DOUBLE; NULL when no draft)
--
-- acceptance_vllm_per_position_between(t0, t1) is the same over t0 <= event_time < t1 (NULL: open end);
-- the view acceptance_vllm_per_position is it over all time.
CREATE OR REPLACE MACRO acceptance_vllm_per_position_between(t0, t1) AS TABLE
SELECT
    engine_id,
    model,
    method,
    num_spec_tokens,
    position,
    vllm_num_accepted AS num_accepted_tokens_per_pos,
    vllm_num_drafts AS num_drafts,
    rate_over_drafts(vllm_num_accepted, vllm_num_drafts) AS acceptance_rate
FROM position_counts_between(t0, t1);

CREATE OR REPLACE VIEW acceptance_vllm_per_position AS
FROM acceptance_vllm_per_position_between(NULL, NULL)
ORDER BY engine_id, model, method, num_spec_tokens, position;

COMMENT ON MACRO TABLE acceptance_vllm_per_position_between IS 'vLLM 0.32.0 accepted-tokens-per-position counter (drafts with k_sched > 0 and accepted >= i + 1), bugs included; window t0 <= event_time < t1.';
COMMENT ON VIEW acceptance_vllm_per_position IS 'vLLM 0.32.0 accepted-tokens-per-position counter (drafts with k_sched > 0 and accepted >= i + 1), bugs included.';
