-- vllm_audit_steps: per stored step, the events' vLLM-compatible counts beside vLLM's own.
--
-- From schema 1.6 every step event carries vLLM's own counters of the step (its SpecDecodingStats,
-- as vLLM computed them: vllm_num_drafts, vllm_num_draft_tokens, vllm_num_accepted_tokens,
-- vllm_accepted_per_pos). The same counters rebuilt from the step's outcomes with the definitions
-- acceptance_vllm uses (vllm_num_drafts, vllm_num_draft_tokens, vllm_num_accepted_tokens,
-- vllm_num_accepted_at) stand beside them. One row per stored copy of a step with vLLM's counters;
-- the view vllm_audit sums them up.
--
-- Example:
--   SELECT step_index, num_draft_tokens, vllm_num_draft_tokens FROM vllm_audit_steps WHERE differs
--
-- Columns:
--   engine_id, vllm_version, model, method, num_spec_tokens   the step's engine and group
--   event_id, step_index         the step
--   log_partition, log_offset    where the stored copy was read from the log (a step stored twice
--                                is two rows)
--   num_drafts, num_draft_tokens, num_accepted_tokens   the events' vLLM-compatible counts (BIGINT)
--   accepted_per_pos             the events' vLLM-compatible accepted-per-position counts (BIGINT[])
--   vllm_num_drafts, vllm_num_draft_tokens, vllm_num_accepted_tokens   vLLM's own counts (BIGINT)
--   vllm_accepted_per_pos        vLLM's own accepted-per-position counts (BIGINT[])
--   differs                      whether any count differs (BOOLEAN)
--
-- vllm_audit_steps_between(t0, t1) is the same over t0 <= event_time < t1 (NULL: open end); the
-- view vllm_audit_steps is it over all time.
CREATE OR REPLACE MACRO vllm_audit_steps_between(t0, t1) AS TABLE
WITH shapes AS (
    -- per stored copy of a step, its rows by outcome shape (a few per step); vLLM's counters are the
    -- step's, on each of its rows
    SELECT
        engine_id, vllm_version, model, method, num_spec_tokens, event_id, step_index, log_partition, log_offset,
        kind, k_sched, k_valid, accepted, count(*) AS request_steps,
        any_value(vllm_num_drafts) AS own_drafts, any_value(vllm_num_draft_tokens) AS own_draft_tokens,
        any_value(vllm_num_accepted_tokens) AS own_accepted_tokens, any_value(vllm_accepted_per_pos) AS own_per_pos
    FROM request_steps_between(t0, t1)
    WHERE vllm_num_drafts IS NOT NULL
    GROUP BY engine_id, vllm_version, model, method, num_spec_tokens, event_id, step_index, log_partition, log_offset,
             kind, k_sched, k_valid, accepted
), positions AS (
    SELECT event_id, log_partition, log_offset, list(accepted ORDER BY position) AS accepted_per_pos
    FROM (
        SELECT s.event_id, s.log_partition, s.log_offset, p.position,
               vllm_num_accepted_at(s.k_sched, s.accepted, p.position, s.request_steps) AS accepted
        FROM shapes AS s, range(s.num_spec_tokens) AS p(position)
        GROUP BY s.event_id, s.log_partition, s.log_offset, p.position
    )
    GROUP BY event_id, log_partition, log_offset
), steps AS (
    SELECT
        engine_id, vllm_version, model, method, num_spec_tokens, event_id, step_index, log_partition, log_offset,
        vllm_num_drafts(k_sched, request_steps) AS num_drafts,
        vllm_num_draft_tokens(kind, k_sched, k_valid, request_steps) AS num_draft_tokens,
        vllm_num_accepted_tokens(k_sched, accepted, request_steps) AS num_accepted_tokens,
        CAST(any_value(own_drafts) AS BIGINT) AS vllm_num_drafts,
        CAST(any_value(own_draft_tokens) AS BIGINT) AS vllm_num_draft_tokens,
        CAST(any_value(own_accepted_tokens) AS BIGINT) AS vllm_num_accepted_tokens,
        CAST(any_value(own_per_pos) AS BIGINT[]) AS vllm_accepted_per_pos
    FROM shapes
    GROUP BY engine_id, vllm_version, model, method, num_spec_tokens, event_id, step_index, log_partition, log_offset
)
SELECT
    s.engine_id, s.vllm_version, s.model, s.method, s.num_spec_tokens, s.event_id, s.step_index,
    s.log_partition, s.log_offset, s.num_drafts, s.num_draft_tokens, s.num_accepted_tokens,
    coalesce(p.accepted_per_pos, []) AS accepted_per_pos,
    s.vllm_num_drafts, s.vllm_num_draft_tokens, s.vllm_num_accepted_tokens, s.vllm_accepted_per_pos,
    (s.num_drafts, s.num_draft_tokens, s.num_accepted_tokens, coalesce(p.accepted_per_pos, []))
        IS DISTINCT FROM (s.vllm_num_drafts, s.vllm_num_draft_tokens, s.vllm_num_accepted_tokens,
                          s.vllm_accepted_per_pos) AS differs
FROM steps AS s
LEFT JOIN positions AS p USING (event_id, log_partition, log_offset);

CREATE OR REPLACE VIEW vllm_audit_steps AS
FROM vllm_audit_steps_between(NULL, NULL)
ORDER BY engine_id, step_index;

COMMENT ON MACRO TABLE vllm_audit_steps_between IS 'Per stored step with the counters vLLM computed: beside them the same counters rebuilt from the outcomes, and whether they differ; window t0 <= event_time < t1.';
COMMENT ON VIEW vllm_audit_steps IS 'Per stored step with the counters vLLM computed: beside them the same counters rebuilt from the outcomes, and whether they differ.';

