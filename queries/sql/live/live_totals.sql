-- live_totals: per group, every counter of the live endpoint, read from the views.
--
-- One row per group with request-steps in the live histogram (sql/live/live_histogram.sql): the
-- corrected counts (acceptance), vLLM's (acceptance_vllm), the per-position counts
-- (position_counts), the request-steps per outcome kind and k_zero_reason (outcome_shares) and the
-- verified and wasted draft slots (wasted_verification), so that over the same request-steps the
-- endpoint shows exactly what the views show over the stored tree.
--
-- Example:
--   SELECT engine_id, num_drafts, vllm_num_drafts FROM live_totals
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   num_drafts, num_draft_tokens, num_accepted_tokens   corrected (acceptance; BIGINT)
--   vllm_num_drafts, vllm_num_draft_tokens, vllm_num_accepted_tokens   as vLLM counts them
--                                                (acceptance_vllm; BIGINT)
--   num_accepted_per_position   per 0-based position: corrected drafts with accepted > position
--                               (BIGINT[], num_spec_tokens long)
--   num_reached_per_position    per position: corrected drafts with k_valid > position (BIGINT[])
--   vllm_num_accepted_per_position   per position: vLLM's per-position counter (BIGINT[])
--   request_steps               per kind and k_zero_reason (NULL unless k_zero): request-steps
--                               (STRUCT(kind, k_zero_reason, request_steps)[], sorted)
--   emitted_tokens              tokens emitted (BIGINT)
--   verified_slots, placeholder_slots, pad_slots   wasted_verification's (BIGINT)
CREATE OR REPLACE VIEW live_totals AS
WITH positions AS (
    SELECT
        engine_id,
        model,
        method,
        num_spec_tokens,
        list(num_accepted ORDER BY position) AS num_accepted_per_position,
        list(num_reached ORDER BY position) AS num_reached_per_position,
        list(vllm_num_accepted ORDER BY position) AS vllm_num_accepted_per_position
    FROM position_counts
    GROUP BY engine_id, model, method, num_spec_tokens
),
kinds AS (
    SELECT
        engine_id,
        model,
        method,
        num_spec_tokens,
        list({'kind': kind, 'k_zero_reason': k_zero_reason, 'request_steps': request_steps}
             ORDER BY kind, k_zero_reason) AS request_steps
    FROM outcome_shares
    GROUP BY engine_id, model, method, num_spec_tokens
),
emitted AS (
    SELECT engine_id, model, method, num_spec_tokens, CAST(sum(emitted) AS BIGINT) AS emitted_tokens
    FROM outcome_histogram_between(NULL, NULL)
    GROUP BY engine_id, model, method, num_spec_tokens
)
SELECT
    c.engine_id,
    c.model,
    c.method,
    c.num_spec_tokens,
    c.num_drafts,
    c.num_draft_tokens,
    c.num_accepted_tokens,
    v.num_drafts AS vllm_num_drafts,
    v.num_draft_tokens AS vllm_num_draft_tokens,
    v.num_accepted_tokens AS vllm_num_accepted_tokens,
    coalesce(p.num_accepted_per_position, []) AS num_accepted_per_position,
    coalesce(p.num_reached_per_position, []) AS num_reached_per_position,
    coalesce(p.vllm_num_accepted_per_position, []) AS vllm_num_accepted_per_position,
    k.request_steps,
    e.emitted_tokens,
    w.verified_slots,
    w.placeholder_slots,
    w.pad_slots
FROM acceptance AS c
JOIN acceptance_vllm AS v USING (engine_id, model, method, num_spec_tokens)
JOIN kinds AS k USING (engine_id, model, method, num_spec_tokens)
JOIN emitted AS e USING (engine_id, model, method, num_spec_tokens)
JOIN wasted_verification AS w USING (engine_id, model, method, num_spec_tokens)
LEFT JOIN positions AS p USING (engine_id, model, method, num_spec_tokens)
ORDER BY c.engine_id, c.model, c.method, c.num_spec_tokens;

COMMENT ON VIEW live_totals IS 'Per group, every counter of the live endpoint, read from the views acceptance, acceptance_vllm, position_counts, outcome_shares and wasted_verification.';
