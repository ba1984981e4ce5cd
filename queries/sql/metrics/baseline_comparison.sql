-- baseline_comparison: each configuration's per-position acceptance next to the published baseline of its model.
--
-- Per configuration (model, method, K, pooled over its engines) whose model, method and K match a
-- row of baselines (model_key), one row per draft position: the corrected rate and the rate vLLM
-- reports (vLLM's definition: drafts that accepted position i / all drafts), the baseline's, and
-- the acceptance lengths (1 + the sum of the position rates). A configuration without a match has no
-- row: the report says so. Baselines were measured greedy on MT-Bench: other prompts and sampling
-- move the rates, so a gap says where to look, not that the drafter is broken.
--
-- Example:
--   SELECT model, position, rate, baseline_rate, difference FROM baseline_comparison
--
-- Columns:
--   model, method, num_spec_tokens   the configuration
--   position                     0-based draft position i (INTEGER)
--   rate                         corrected: corrected drafts that accepted position i / corrected
--                                drafts (DOUBLE; NULL without a draft)
--   vllm_rate                    what vLLM reports: its drafts that accepted position i / its drafts
--                                (DOUBLE; NULL without a draft)
--   baseline_rate                the published rate at position i (DOUBLE)
--   difference                   rate - baseline_rate (DOUBLE)
--   acceptance_length            corrected: 1 + the configuration's rates summed over positions (DOUBLE)
--   baseline_acceptance_length   the published acceptance length (DOUBLE)
--   baseline_model, baseline_drafter, dataset, sampling, source   the baseline's row
--
-- baseline_comparison_between(t0, t1) is the same over t0 <= event_time < t1 (NULL: open end); the
-- view baseline_comparison is it over all time. baseline_comparison_between(NULL, NULL, source :=
-- 'name') is it over the shape counts of the table name (outcome_counts): what the report shows.
CREATE OR REPLACE MACRO baseline_comparison_between(t0, t1, source := NULL) AS TABLE
WITH configurations AS (
    SELECT
        model,
        method,
        num_spec_tokens,
        position,
        rate_over_drafts(sum(num_accepted), sum(num_drafts)) AS rate,
        rate_over_drafts(sum(vllm_num_accepted), sum(vllm_num_drafts)) AS vllm_rate
    FROM position_counts_between(t0, t1, source := source)
    GROUP BY model, method, num_spec_tokens, position
)
SELECT
    c.model,
    c.method,
    c.num_spec_tokens,
    c.position,
    c.rate,
    c.vllm_rate,
    b.rate AS baseline_rate,
    c.rate - b.rate AS difference,
    1 + sum(c.rate) OVER (PARTITION BY c.model, c.method, c.num_spec_tokens) AS acceptance_length,
    b.acceptance_length AS baseline_acceptance_length,
    b.model AS baseline_model,
    b.drafter AS baseline_drafter,
    b.dataset,
    b.sampling,
    b.source
FROM configurations AS c
JOIN baselines AS b
    ON model_key(c.model) = model_key(b.model)
    AND c.method = b.method
    AND c.num_spec_tokens = b.num_spec_tokens
    AND c.position = b.position;

CREATE OR REPLACE VIEW baseline_comparison AS
FROM baseline_comparison_between(NULL, NULL)
ORDER BY model, method, num_spec_tokens, position;

COMMENT ON MACRO TABLE baseline_comparison_between IS 'Per configuration matching a published baseline (model, method, K): per-position corrected and vLLM rates next to the baseline; window t0 <= event_time < t1.';
COMMENT ON VIEW baseline_comparison IS 'Per configuration matching a published baseline (model, method, K): per-position corrected and vLLM rates next to the baseline.';
