-- acceptance_by_definition: acceptance per group under both definitions of a draft, long form.
--
-- definition = 'corrected': a draft is a request-step of kind 'drafted', or 'grammar_invalid' or
-- 'grammar_rejected' with k_valid > 0 (is_draft). definition = 'vllm': any request-step with k_sched > 0, as vLLM
-- 0.32.0 counts it (is_vllm_draft). acceptance and acceptance_vllm each select one definition.
-- Every group with request-steps has a row per definition, with zero counts and NULL ratios when
-- it has no draft.
--
-- Example:
--   SELECT engine_id, definition, acceptance_rate FROM acceptance_by_definition ORDER BY ALL
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   definition              'corrected' or 'vllm'
--   num_drafts              drafts under that definition (BIGINT)
--   num_draft_tokens        sum of k_valid over them (BIGINT)
--   num_accepted_tokens     sum of accepted over them (BIGINT)
--   acceptance_rate         num_accepted_tokens / num_draft_tokens (DOUBLE; NULL when no draft token)
--   mean_acceptance_length  1 + num_accepted_tokens / num_drafts (DOUBLE; NULL when no draft)
--
-- acceptance_by_definition_between(t0, t1) is the same over t0 <= event_time < t1 (NULL: open end);
-- the view acceptance_by_definition is it over all time.
CREATE OR REPLACE MACRO acceptance_by_definition_between(t0, t1) AS TABLE
WITH totals AS (
    SELECT
        engine_id,
        model,
        method,
        num_spec_tokens,
        num_drafts(kind, k_valid, request_steps) AS num_drafts,
        num_draft_tokens(kind, k_valid, request_steps) AS num_draft_tokens,
        num_accepted_tokens(kind, k_valid, accepted, request_steps) AS num_accepted_tokens,
        vllm_num_drafts(k_sched, request_steps) AS vllm_num_drafts,
        vllm_num_draft_tokens(kind, k_sched, k_valid, request_steps) AS vllm_num_draft_tokens,
        vllm_num_accepted_tokens(k_sched, accepted, request_steps) AS vllm_num_accepted_tokens
    FROM outcome_histogram_between(t0, t1)
    GROUP BY engine_id, model, method, num_spec_tokens
)
-- One row per definition, as a UNION ALL (not a LATERAL VALUES): the Spark views are these
-- statements transpiled (queries/spark.py), and Spark takes no outer column in a VALUES list.
, definitions AS (
    SELECT engine_id, model, method, num_spec_tokens, 'corrected' AS definition, num_drafts, num_draft_tokens,
           num_accepted_tokens
    FROM totals
    UNION ALL
    SELECT engine_id, model, method, num_spec_tokens, 'vllm' AS definition, vllm_num_drafts, vllm_num_draft_tokens,
           vllm_num_accepted_tokens
    FROM totals
)
SELECT
    engine_id,
    model,
    method,
    num_spec_tokens,
    definition,
    num_drafts,
    num_draft_tokens,
    num_accepted_tokens,
    acceptance_rate(num_accepted_tokens, num_draft_tokens) AS acceptance_rate,
    mean_acceptance_length(num_accepted_tokens, num_drafts) AS mean_acceptance_length
FROM definitions;

CREATE OR REPLACE VIEW acceptance_by_definition AS
FROM acceptance_by_definition_between(NULL, NULL);

COMMENT ON MACRO TABLE acceptance_by_definition_between IS 'Acceptance per group under both draft definitions (corrected, vllm), long form; window t0 <= event_time < t1.';
COMMENT ON VIEW acceptance_by_definition IS 'Acceptance per group under both draft definitions (corrected, vllm), long form.';
