-- position_counts: per group and draft position, the counts behind the per-position rates.
--
-- One row per group (engine_id, model, method, num_spec_tokens) that has request-steps and per
-- position 0 .. num_spec_tokens - 1 (0-based, like the `position` label of vLLM's
-- spec_decode_num_accepted_tokens_per_pos counter). Built from outcome_counts, so it expands
-- histogram rows, never request-steps.
--
-- Example:
--   SELECT position, num_accepted, vllm_num_accepted FROM position_counts ORDER BY position
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   position                                    0-based draft position i (INTEGER)
--   num_drafts                                  corrected drafts in the group
--   num_reached                                 corrected drafts with k_valid >= i + 1
--   num_accepted                                corrected drafts with accepted >= i + 1
--   vllm_num_drafts                             vLLM drafts (k_sched > 0) in the group
--   vllm_num_accepted                           vLLM drafts with accepted >= i + 1 (vLLM's counter)
--
-- position_counts_between(t0, t1) is the same over t0 <= event_time < t1 (NULL: open end);
-- the view position_counts is it over all time. position_counts_between(NULL, NULL, source :=
-- 'name') is it over the shape counts of the table name (outcome_counts): the report's.
CREATE OR REPLACE MACRO position_counts_between(t0, t1, source := NULL) AS TABLE
SELECT
    h.engine_id,
    h.model,
    h.method,
    h.num_spec_tokens,
    CAST(p.position AS INTEGER) AS position,
    num_drafts(h.kind, h.k_valid, h.request_steps) AS num_drafts,
    num_reached(h.kind, h.k_valid, p.position, h.request_steps) AS num_reached,
    num_accepted_at(h.kind, h.k_valid, h.accepted, p.position, h.request_steps) AS num_accepted,
    vllm_num_drafts(h.k_sched, h.request_steps) AS vllm_num_drafts,
    vllm_num_accepted_at(h.k_sched, h.accepted, p.position, h.request_steps) AS vllm_num_accepted
FROM outcome_counts(t0, t1, source) AS h, range(h.num_spec_tokens) AS p(position)
GROUP BY h.engine_id, h.model, h.method, h.num_spec_tokens, p.position;

CREATE OR REPLACE VIEW position_counts AS
FROM position_counts_between(NULL, NULL);

COMMENT ON MACRO TABLE position_counts_between IS 'Per group and 0-based draft position: corrected drafts, reached, accepted, and vLLM drafts and accepted-per-position; window t0 <= event_time < t1.';
COMMENT ON VIEW position_counts IS 'Per group and 0-based draft position: corrected drafts, reached, accepted, and vLLM drafts and accepted-per-position.';
