-- audited_request_steps: request_steps over t0 <= event_time < t1, each row with its step's verdict.
--
-- A table macro alone (NULL bounds: open ends); its readers each give it their window.
-- A step's rows share its verdict (vllm_audit_steps' differs), so request-steps summed by it tell
-- how much of the data lies in steps where the plugin's model of vLLM's counting held, and how much
-- where it did not: the rollups (file_rollup) and report_counts keep it as a dimension, and the
-- report says it in a line. Only the differing steps (few or none) are joined to the rows.
--
-- Example:
--   SELECT vllm_counts_differ, count(*) AS request_steps FROM audited_request_steps(NULL, NULL) GROUP BY ALL
--
-- Columns:
--   vllm_counts_differ           whether the step's counts rebuilt from its outcomes differ from the
--                                counters vLLM computed for it; NULL for a step without vLLM's
--                                counters (BOOLEAN)
--   every other column           as in request_steps
CREATE OR REPLACE MACRO audited_request_steps(t0, t1) AS TABLE
SELECT r.*, CASE WHEN r.vllm_num_drafts IS NOT NULL THEN d.event_id IS NOT NULL END AS vllm_counts_differ
FROM request_steps_between(t0, t1) AS r
LEFT JOIN (SELECT event_id, log_partition, log_offset FROM vllm_audit_steps_between(t0, t1) WHERE differs) AS d
    ON r.event_id = d.event_id AND r.log_partition = d.log_partition AND r.log_offset = d.log_offset;

COMMENT ON MACRO TABLE audited_request_steps IS 'request_steps over t0 <= event_time < t1 (NULL: open end), each row with vllm_counts_differ: whether the counts of its step rebuilt from the outcomes differ from the counters vLLM computed (NULL: none).';
