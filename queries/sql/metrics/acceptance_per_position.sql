-- acceptance_per_position: corrected per-position acceptance rates, per group.
--
-- One row per group with request-steps and per position 0 .. num_spec_tokens - 1 (0-based).
-- Drafts are the corrected ones (see acceptance). Two rates:
--   rate_over_drafts  #(accepted >= i + 1) / num_drafts: vLLM's definition, over corrected drafts
--   rate_conditional  #(accepted >= i + 1) / #(k_valid >= i + 1): acceptance at position i among
--                     drafts that verified a token there
--
-- Example:
--   SELECT position, rate_over_drafts, rate_conditional FROM acceptance_per_position ORDER BY engine_id, position
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   position          0-based draft position i (INTEGER)
--   num_accepted      corrected drafts with accepted >= i + 1 (BIGINT)
--   num_drafts        corrected drafts in the group (BIGINT)
--   num_reached       corrected drafts with k_valid >= i + 1 (BIGINT)
--   rate_over_drafts  num_accepted / num_drafts (DOUBLE; NULL when no draft)
--   rate_conditional  num_accepted / num_reached (DOUBLE; NULL when no draft reached position i)
--
-- acceptance_per_position_between(t0, t1) is the same over t0 <= event_time < t1 (NULL: open end);
-- the view acceptance_per_position is it over all time.
CREATE OR REPLACE MACRO acceptance_per_position_between(t0, t1) AS TABLE
SELECT
    engine_id,
    model,
    method,
    num_spec_tokens,
    position,
    num_accepted,
    num_drafts,
    num_reached,
    rate_over_drafts(num_accepted, num_drafts) AS rate_over_drafts,
    rate_conditional(num_accepted, num_reached) AS rate_conditional
FROM position_counts_between(t0, t1);

CREATE OR REPLACE VIEW acceptance_per_position AS
FROM acceptance_per_position_between(NULL, NULL)
ORDER BY engine_id, model, method, num_spec_tokens, position;

COMMENT ON MACRO TABLE acceptance_per_position_between IS 'Corrected per-position acceptance: vLLM-style rate (over all drafts) and conditional rate (over drafts reaching the position); window t0 <= event_time < t1.';
COMMENT ON VIEW acceptance_per_position IS 'Corrected per-position acceptance: vLLM-style rate (over all drafts) and conditional rate (over drafts reaching the position).';
