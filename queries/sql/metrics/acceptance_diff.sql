-- acceptance_diff: how wrong vLLM's built-in numbers were, per group.
--
-- One row per group with request-steps: the corrected acceptance (see acceptance) next to what
-- vLLM 0.32.0 reported (see acceptance_vllm), and corrected minus reported. A perfect drafter
-- whose steps were all skipped for length shows vllm_acceptance_rate 0 and acceptance_rate NULL
-- (no drafts at all), not a bad drafter.
--
-- Example:
--   SELECT engine_id, model, acceptance_rate, vllm_acceptance_rate, acceptance_rate_diff FROM acceptance_diff_between(TIMESTAMP '2026-11-30 00:00:00', NULL)
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   num_drafts, vllm_num_drafts                         corrected and vLLM draft counts (BIGINT)
--   extra_vllm_drafts                                   vllm_num_drafts - num_drafts: placeholder,
--                                                       all-invalid and unverified (k_zero
--                                                       'verify_budget') request-steps vLLM counted
--                                                       (BIGINT)
--   num_draft_tokens, vllm_num_draft_tokens             (BIGINT)
--   num_accepted_tokens, vllm_num_accepted_tokens       (BIGINT)
--   acceptance_rate, vllm_acceptance_rate               (DOUBLE; NULL without draft tokens)
--   acceptance_rate_diff                                acceptance_rate - vllm_acceptance_rate (DOUBLE)
--   mean_acceptance_length, vllm_mean_acceptance_length  (DOUBLE; NULL without drafts)
--   mean_acceptance_length_diff                         corrected - vLLM (DOUBLE)
--
-- acceptance_diff_between(t0, t1) is the same over t0 <= event_time < t1 (NULL: open end); the
-- view acceptance_diff is it over all time.
CREATE OR REPLACE MACRO acceptance_diff_between(t0, t1) AS TABLE
WITH side_by_side AS (
    SELECT
        engine_id,
        model,
        method,
        num_spec_tokens,
        any_value(num_drafts) FILTER (WHERE definition = 'corrected') AS num_drafts,
        any_value(num_drafts) FILTER (WHERE definition = 'vllm') AS vllm_num_drafts,
        any_value(num_draft_tokens) FILTER (WHERE definition = 'corrected') AS num_draft_tokens,
        any_value(num_draft_tokens) FILTER (WHERE definition = 'vllm') AS vllm_num_draft_tokens,
        any_value(num_accepted_tokens) FILTER (WHERE definition = 'corrected') AS num_accepted_tokens,
        any_value(num_accepted_tokens) FILTER (WHERE definition = 'vllm') AS vllm_num_accepted_tokens,
        any_value(acceptance_rate) FILTER (WHERE definition = 'corrected') AS acceptance_rate,
        any_value(acceptance_rate) FILTER (WHERE definition = 'vllm') AS vllm_acceptance_rate,
        any_value(mean_acceptance_length) FILTER (WHERE definition = 'corrected') AS mean_acceptance_length,
        any_value(mean_acceptance_length) FILTER (WHERE definition = 'vllm') AS vllm_mean_acceptance_length
    FROM acceptance_by_definition_between(t0, t1)
    GROUP BY engine_id, model, method, num_spec_tokens
)
SELECT
    engine_id,
    model,
    method,
    num_spec_tokens,
    num_drafts,
    vllm_num_drafts,
    vllm_num_drafts - num_drafts AS extra_vllm_drafts,
    num_draft_tokens,
    vllm_num_draft_tokens,
    num_accepted_tokens,
    vllm_num_accepted_tokens,
    acceptance_rate,
    vllm_acceptance_rate,
    acceptance_rate - vllm_acceptance_rate AS acceptance_rate_diff,
    mean_acceptance_length,
    vllm_mean_acceptance_length,
    mean_acceptance_length - vllm_mean_acceptance_length AS mean_acceptance_length_diff
FROM side_by_side;

CREATE OR REPLACE VIEW acceptance_diff AS
FROM acceptance_diff_between(NULL, NULL)
ORDER BY engine_id, model, method, num_spec_tokens;

COMMENT ON MACRO TABLE acceptance_diff_between IS 'Corrected vs vLLM-reported acceptance per group, and corrected minus reported; window t0 <= event_time < t1.';
COMMENT ON VIEW acceptance_diff IS 'Corrected vs vLLM-reported acceptance per group, and corrected minus reported.';
