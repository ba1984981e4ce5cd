-- baselines: published per-position acceptance of common target-drafter pairs, to hold a drafter against.
--
-- A small reference table shipped with the package, one row per pair and draft position. Each row
-- names where its numbers come from (the file and commit), the dataset, K and the sampling; rates
-- are vLLM's per-position definition (drafts that accepted the position / all drafts), and the
-- acceptance length is 1 + accepted tokens / drafts, as vLLM computes them from its counters in a
-- run with no skip, no grammar and no K = 0 (where vLLM's numbers and the corrected ones agree).
-- New rows come with a new source; rows are never edited in place. A configuration's model is
-- matched on model_key (definitions/models.sql): a served path such as
-- /models/Llama-3.1-8B-Instruct matches meta-llama/Llama-3.1-8B-Instruct.
--
-- Example:
--   SELECT model, method, num_spec_tokens, position, rate, acceptance_length FROM baselines
--
-- Columns:
--   model              the target model, as published (VARCHAR)
--   drafter            the drafter it was measured with (VARCHAR)
--   method             vLLM's speculative method (VARCHAR)
--   num_spec_tokens    K (INTEGER)
--   position           0-based draft position i (INTEGER)
--   rate               drafts that accepted position i / all drafts (DOUBLE)
--   acceptance_length  1 + accepted tokens / drafts, over all positions (DOUBLE)
--   dataset            prompts and output length (VARCHAR)
--   sampling           the sampling used (VARCHAR)
--   source             the file and commit the numbers are published in (VARCHAR)
CREATE OR REPLACE VIEW baselines AS
WITH pairs(model, drafter, method, num_spec_tokens, rates, acceptance_length) AS (
    VALUES
        ('meta-llama/Llama-3.1-8B-Instruct', 'RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3', 'eagle3', 3,
         [0.7296, 0.5208, 0.3545], 2.60),
        ('Qwen/Qwen3-8B', 'RedHatAI/Qwen3-8B-speculator.eagle3', 'eagle3', 3,
         [0.6541, 0.3993, 0.2020], 2.26),
        ('openai/gpt-oss-20b', 'RedHatAI/gpt-oss-20b-speculator.eagle3', 'eagle3', 3,
         [0.7165, 0.5120, 0.3337], 2.56),
        ('Qwen/Qwen3-VL-30B-A3B-Instruct-FP8', 'nm-testing/Speculator-Qwen3-30B-MOE-VL-Eagle3', 'eagle3', 3,
         [0.2900, 0.0620, 0.0115], 1.35)
)
SELECT
    model,
    drafter,
    method,
    CAST(num_spec_tokens AS INTEGER) AS num_spec_tokens,
    CAST(p.position AS INTEGER) AS position,
    CAST(rates[p.position + 1] AS DOUBLE) AS rate,
    CAST(acceptance_length AS DOUBLE) AS acceptance_length,
    'MT-Bench (philschmid/mt-bench), 80 prompts, 256 output tokens' AS dataset,
    'greedy (temperature 0)' AS sampling,
    'vllm-project/vllm tests/v1/spec_decode/test_acceptance_length.py at 029ba37503c5' AS source
FROM pairs, range(num_spec_tokens) AS p(position)
ORDER BY model, position;

COMMENT ON VIEW baselines IS 'Published per-position acceptance of common target-drafter pairs (vLLM rate definition), with source, dataset, K and sampling.';
