-- adaptive_verification: acceptance over the steps where the runner verified only some drafts.
--
-- Model Runner V2's adaptive verification (vLLM 0.32.0, method dspark) picks a draft budget per
-- step and admits the best draft slots on the GPU; which requests' drafts were left out never
-- reaches the host, but the step's total does (drafts_verified). Over those steps the rows' k_valid
-- overstate what was verified, so acceptance computed from them (the view acceptance, and vLLM's
-- own counters) is too low; accepted / drafts_verified is the pooled rate per verified draft slot.
-- It is exact unless a slot went to something that has no row or no chance: a -1 grammar pad
-- (async structured output; vLLM rejects it) or a request that finished or was aborted with its step
-- in flight (vLLM skips it); those only lower it. Steps whose budget was 0 are k_zero rows with
-- k_zero_reason 'verify_budget' (see k_zero_reasons), not counted here. A step stored twice (at-least-once
-- delivery) counts twice, numerator and denominator alike. One row per group with such steps.
--
-- Example:
--   SELECT engine_id, acceptance_rate_scheduled, acceptance_rate_verified FROM adaptive_verification
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   steps                        steps with a partial budget (BIGINT)
--   draft_tokens_scheduled       sum of k_valid over their drafts (corrected definition; BIGINT)
--   draft_tokens_verified        sum of the steps' drafts_verified: draft slots verified (BIGINT)
--   num_accepted_tokens          sum of accepted over their drafts (BIGINT)
--   acceptance_rate_scheduled    num_accepted_tokens / draft_tokens_scheduled (DOUBLE; NULL when 0)
--   acceptance_rate_verified     num_accepted_tokens / draft_tokens_verified: the rate per verified
--                                slot (DOUBLE; NULL when 0)
--
-- adaptive_verification_between(t0, t1) is the same over t0 <= event_time < t1 (NULL: open end);
-- the view adaptive_verification is it over all time.
CREATE OR REPLACE MACRO adaptive_verification_between(t0, t1) AS TABLE
WITH steps AS (
    SELECT
        engine_id,
        model,
        method,
        num_spec_tokens,
        any_value(drafts_verified) AS drafts_verified,
        num_draft_tokens(kind, k_valid) AS draft_tokens_scheduled,
        num_accepted_tokens(kind, k_valid, accepted) AS num_accepted_tokens
    FROM request_steps_between(t0, t1)
    WHERE drafts_verified IS NOT NULL
    -- per stored copy of a step: a step delivered twice brings its drafts_verified twice too
    GROUP BY engine_id, model, method, num_spec_tokens, event_id, log_partition, log_offset
)
SELECT
    engine_id,
    model,
    method,
    num_spec_tokens,
    CAST(count(*) AS BIGINT) AS steps,
    CAST(coalesce(sum(draft_tokens_scheduled), 0) AS BIGINT) AS draft_tokens_scheduled,
    CAST(sum(drafts_verified) AS BIGINT) AS draft_tokens_verified,
    CAST(coalesce(sum(num_accepted_tokens), 0) AS BIGINT) AS num_accepted_tokens,
    acceptance_rate(sum(num_accepted_tokens), sum(draft_tokens_scheduled)) AS acceptance_rate_scheduled,
    acceptance_rate(sum(num_accepted_tokens), sum(drafts_verified)) AS acceptance_rate_verified
FROM steps
GROUP BY engine_id, model, method, num_spec_tokens;

CREATE OR REPLACE VIEW adaptive_verification AS
FROM adaptive_verification_between(NULL, NULL)
ORDER BY engine_id, model, method, num_spec_tokens;

COMMENT ON MACRO TABLE adaptive_verification_between IS 'Steps where adaptive verification verified only some scheduled drafts: drafts scheduled vs verified, and the exact acceptance rate over them; window t0 <= event_time < t1.';
COMMENT ON VIEW adaptive_verification IS 'Steps where adaptive verification verified only some scheduled drafts: drafts scheduled vs verified, and the exact acceptance rate over them.';
