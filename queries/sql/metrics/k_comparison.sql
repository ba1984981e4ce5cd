-- k_comparison: configurations of one model side by side (K, drafter), best first.
--
-- Acceptance rate falls as K rises (later positions are harder), so ranking K by it picks the
-- wrong K. What a verification buys is the tokens it yields: per model, each (method, K) pooled
-- over its engines, ranked by tokens per verification step, with the yield per verified slot
-- (the target's work, placeholders and pads included) and the corrected rate beside it.
--
-- Example:
--   SELECT model, method, num_spec_tokens, tokens_per_verify_step, acceptance_rate, rank_in_model FROM k_comparison
--
-- Columns:
--   model, method, num_spec_tokens   the configuration
--   engines                      engines that ran it (BIGINT)
--   verify_steps                 request-steps whose draft slots the target verified (not k_zero,
--                                k_sched > 0) (BIGINT)
--   tokens_per_verify_step       1 + accepted tokens / verify_steps: tokens a request gets per
--                                verification (DOUBLE; NULL without one)
--   accepted_per_verified_slot   accepted tokens / draft slots verified (DOUBLE; NULL without one)
--   acceptance_rate              corrected: accepted / draft tokens of corrected drafts (DOUBLE)
--   mean_acceptance_length       corrected: 1 + accepted / corrected drafts (DOUBLE)
--   rank_in_model                1 for the configuration of the model with the most tokens per
--                                verification step (BIGINT)
--
-- k_comparison_between(t0, t1) is the same over t0 <= event_time < t1 (NULL: open end); the view
-- k_comparison is it over all time. k_comparison_between(NULL, NULL, source := 'name') is it over
-- the shape counts of the table name (outcome_counts): what the report ranks.
CREATE OR REPLACE MACRO k_comparison_between(t0, t1, source := NULL) AS TABLE
WITH configurations AS (
    SELECT
        model,
        method,
        num_spec_tokens,
        CAST(count(DISTINCT engine_id) AS BIGINT) AS engines,
        num_verify_steps(kind, k_sched, request_steps) AS verify_steps,
        num_verified_accepted(kind, k_sched, accepted, request_steps) AS verified_accepted,
        num_verified_slots(kind, k_sched, request_steps) AS verified_slots,
        num_drafts(kind, k_valid, request_steps) AS num_drafts,
        num_draft_tokens(kind, k_valid, request_steps) AS num_draft_tokens,
        num_accepted_tokens(kind, k_valid, accepted, request_steps) AS num_accepted_tokens
    FROM outcome_counts(t0, t1, source)
    GROUP BY model, method, num_spec_tokens
)
SELECT
    model,
    method,
    num_spec_tokens,
    engines,
    verify_steps,
    tokens_per_verify_step(verified_accepted, verify_steps) AS tokens_per_verify_step,
    verified_accepted / nullif(verified_slots, 0) AS accepted_per_verified_slot,
    acceptance_rate(num_accepted_tokens, num_draft_tokens) AS acceptance_rate,
    mean_acceptance_length(num_accepted_tokens, num_drafts) AS mean_acceptance_length,
    rank() OVER (PARTITION BY model ORDER BY tokens_per_verify_step(verified_accepted, verify_steps) DESC NULLS LAST)
        AS rank_in_model
FROM configurations;

CREATE OR REPLACE VIEW k_comparison AS
FROM k_comparison_between(NULL, NULL)
ORDER BY model, rank_in_model, method, num_spec_tokens;

COMMENT ON MACRO TABLE k_comparison_between IS 'Per model, each (method, K) over its engines: tokens per verification step, accepted per verified slot, corrected rate, ranked by tokens per step; window t0 <= event_time < t1.';
COMMENT ON VIEW k_comparison IS 'Per model, each (method, K) over its engines: tokens per verification step, accepted per verified slot, corrected rate, ranked by tokens per step.';
