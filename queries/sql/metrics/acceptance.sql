-- acceptance: corrected speculative-decoding acceptance, per group.
--
-- A draft is a request-step of kind 'drafted', or 'grammar_invalid' or 'grammar_rejected' with
-- k_valid > 0, counting its k_valid drafts that obeyed the grammar: steps that
-- were skipped for length (placeholder drafts), whose drafts were all grammar-invalid, or that
-- verified no draft (k_zero: nothing scheduled, or adaptive verification's budget was 0) are not
-- drafts. Every group with request-steps has a row, with zero counts and NULL ratios when it has
-- no draft. In steps where adaptive verification verified only some drafts k_valid overstates
-- what was verified: see adaptive_verification.
--
-- Example:
--   SELECT engine_id, acceptance_rate, mean_acceptance_length FROM acceptance
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   num_drafts              corrected drafts (BIGINT)
--   num_draft_tokens        sum of k_valid over them (BIGINT)
--   num_accepted_tokens     sum of accepted over them (BIGINT)
--   acceptance_rate         num_accepted_tokens / num_draft_tokens (DOUBLE; NULL when no draft token)
--   mean_acceptance_length  1 + num_accepted_tokens / num_drafts (DOUBLE; NULL when no draft)
--
-- acceptance_between(t0, t1) is the same over t0 <= event_time < t1 (NULL: open end);
-- the view acceptance is it over all time.
CREATE OR REPLACE MACRO acceptance_between(t0, t1) AS TABLE
SELECT * EXCLUDE (definition)
FROM acceptance_by_definition_between(t0, t1)
WHERE definition = 'corrected';

CREATE OR REPLACE VIEW acceptance AS
FROM acceptance_between(NULL, NULL)
ORDER BY engine_id, model, method, num_spec_tokens;

COMMENT ON MACRO TABLE acceptance_between IS 'Corrected acceptance per group: drafts = drafted + grammar_invalid with k_valid > 0; rate and mean acceptance length; window t0 <= event_time < t1.';
COMMENT ON VIEW acceptance IS 'Corrected acceptance per group: drafts = drafted + grammar_invalid with k_valid > 0; rate and mean acceptance length.';
