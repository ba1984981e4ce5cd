-- vllm_audit: the plugin's vLLM-compatible numbers against vLLM's own, step by step.
--
-- From schema 1.6 every step event carries vLLM's own counters of the step; the view
-- vllm_audit_steps sets them beside the counters rebuilt from the step's outcomes, the numbers
-- acceptance_vllm reports as vLLM's. A step where the two differ means the plugin's model of how
-- vLLM counts no longer holds on that release: the corrected metrics, built from the same
-- outcomes, are suspect there. One row per engine, vLLM version, model and method with steps stored.
--
-- Example:
--   SELECT engine_id, vllm_version, steps_compared, steps_differing FROM vllm_audit
--
-- Columns:
--   engine_id, vllm_version, model, method   the group
--   steps_compared               steps with vLLM's counters (BIGINT)
--   steps_differing              of them, steps where a count differs (BIGINT)
--   first_differing_step         the lowest step_index of a differing step (BIGINT; NULL: none)
--   last_differing_step          the highest (BIGINT; NULL: none)
--   num_drafts_difference        the events' num_drafts less vLLM's, summed over the steps compared (BIGINT)
--   num_draft_tokens_difference  the same for num_draft_tokens (BIGINT)
--   num_accepted_tokens_difference   the same for num_accepted_tokens (BIGINT)
--   accepted_per_pos_difference  the same per draft position (BIGINT[])
--   steps_without_counts         steps stored without vLLM's counters: vLLM computed none
--                                ('stats_off'), none came back ('not_returned'), or written before
--                                schema 1.6 (BIGINT)
--
-- vllm_audit_between(t0, t1) is the same over t0 <= event_time < t1 (NULL: open end); the view
-- vllm_audit is it over all time.
CREATE OR REPLACE MACRO vllm_audit_between(t0, t1) AS TABLE
WITH audited AS MATERIALIZED (
    FROM vllm_audit_steps_between(t0, t1)
), compared AS (
    SELECT
        engine_id, vllm_version, model, method,
        CAST(count(*) AS BIGINT) AS steps_compared,
        CAST(count(*) FILTER (WHERE differs) AS BIGINT) AS steps_differing,
        min(step_index) FILTER (WHERE differs) AS first_differing_step,
        max(step_index) FILTER (WHERE differs) AS last_differing_step,
        CAST(coalesce(sum(num_drafts - vllm_num_drafts), 0) AS BIGINT) AS num_drafts_difference,
        CAST(coalesce(sum(num_draft_tokens - vllm_num_draft_tokens), 0) AS BIGINT) AS num_draft_tokens_difference,
        CAST(coalesce(sum(num_accepted_tokens - vllm_num_accepted_tokens), 0) AS BIGINT)
            AS num_accepted_tokens_difference
    FROM audited
    GROUP BY engine_id, vllm_version, model, method
), per_position AS (
    SELECT engine_id, vllm_version, model, method,
           list(difference ORDER BY position) AS accepted_per_pos_difference
    FROM (
        SELECT engine_id, vllm_version, model, method, p.position,
               CAST(sum(coalesce(accepted_per_pos[p.position + 1], 0)
                        - coalesce(vllm_accepted_per_pos[p.position + 1], 0)) AS BIGINT) AS difference
        FROM audited, range(greatest(len(accepted_per_pos), len(vllm_accepted_per_pos))) AS p(position)
        GROUP BY engine_id, vllm_version, model, method, p.position
    )
    GROUP BY engine_id, vllm_version, model, method
), stored AS (
    SELECT engine_id, vllm_version, model, method,
           CAST(count(DISTINCT (event_id, log_partition, log_offset))
                FILTER (WHERE vllm_num_drafts IS NULL) AS BIGINT) AS steps_without_counts
    FROM request_steps_between(t0, t1)
    GROUP BY engine_id, vllm_version, model, method
)
SELECT
    engine_id, vllm_version, model, method,
    coalesce(c.steps_compared, 0) AS steps_compared,
    coalesce(c.steps_differing, 0) AS steps_differing,
    c.first_differing_step,
    c.last_differing_step,
    coalesce(c.num_drafts_difference, 0) AS num_drafts_difference,
    coalesce(c.num_draft_tokens_difference, 0) AS num_draft_tokens_difference,
    coalesce(c.num_accepted_tokens_difference, 0) AS num_accepted_tokens_difference,
    coalesce(p.accepted_per_pos_difference, []) AS accepted_per_pos_difference,
    s.steps_without_counts
FROM stored AS s
LEFT JOIN compared AS c USING (engine_id, vllm_version, model, method)
LEFT JOIN per_position AS p USING (engine_id, vllm_version, model, method);

CREATE OR REPLACE VIEW vllm_audit AS
FROM vllm_audit_between(NULL, NULL)
ORDER BY engine_id, vllm_version, model, method;

COMMENT ON MACRO TABLE vllm_audit_between IS 'Per engine, vLLM version, model and method: steps whose counters as vLLM computed them were compared with those rebuilt from the outcomes, steps that differ, and the differences per counter and position; window t0 <= event_time < t1.';
COMMENT ON VIEW vllm_audit IS 'Per engine, vLLM version, model and method: steps whose counters as vLLM computed them were compared with those rebuilt from the outcomes, steps that differ, and the differences per counter and position.';
