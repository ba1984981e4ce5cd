-- request_reconciliation: per request, vLLM's own per-request numbers beside the events' and the truth.
--
-- With --per-request-spec-decode-metrics summary or detailed (vLLM 0.29 on), vLLM keeps each
-- request's acceptance (RequestSpecDecodeMetrics) and returns it when the request finishes; the
-- plugin stores it on the request's row at that step (schema 1.7). Here, per request: vLLM's own
-- numbers (drafts = the sum of its histogram, accepted = the sum of j times its count), the same
-- rebuilt from the request's request-steps as vLLM counts them (request_acceptance's vllm_*;
-- equal to vLLM's, or differs says the plugin's model of vLLM's counting drifted), and the
-- corrected ones, with what makes those differ: steps skipped for length (placeholders vLLM
-- counts as rejected drafts), grammar-invalid drafts, K = 0 steps. A request whose rows are in the
-- window but whose vLLM numbers are not (vLLM kept none, or it finished outside the window) reads
-- NULL there.
--
-- Example:
--   SELECT request_id, vllm_reported_acceptance_rate, acceptance_rate, why FROM request_reconciliation WHERE why <> ''
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   request_id                  vLLM request id (unique within an engine)
--   vllm_reported_drafts        the drafts vLLM counted for the request (BIGINT; NULL: vLLM kept none)
--   vllm_reported_draft_tokens  the draft tokens vLLM counted (BIGINT)
--   vllm_reported_accepted_tokens   the accepted draft tokens vLLM counted (BIGINT)
--   vllm_reported_acceptance_rate   vLLM's per-request rate: accepted / draft tokens (DOUBLE)
--   vllm_reported_accepted_per_step   at the detailed level, vLLM's accepted tokens per verify step (INTEGER[])
--   vllm_num_drafts             the events' count of the request's drafts as vLLM counts them (BIGINT)
--   vllm_num_draft_tokens       the same for draft tokens (BIGINT)
--   vllm_num_accepted_tokens    the same for accepted tokens (BIGINT)
--   vllm_accepted_per_step      the events' accepted tokens of each vLLM draft, in step order (INTEGER[])
--   differs                     whether the events' vLLM-compatible numbers differ from vLLM's own
--                               (per step too, at the detailed level) (BOOLEAN; NULL without vLLM's)
--   num_drafts, num_draft_tokens, num_accepted_tokens   the corrected counts (BIGINT)
--   acceptance_rate             the corrected rate: accepted / draft tokens (DOUBLE)
--   skips                       request-steps skipped for length (BIGINT)
--   grammar_steps               request-steps with grammar-invalid drafts (BIGINT)
--   k_zero_steps                request-steps with K = 0 (BIGINT)
--   why                         what makes the numbers as vLLM counts them differ from the corrected
--                               ones: a list of 'skipped for length', 'grammar', 'K = 0' ('' when they
--                               agree)
--
-- request_reconciliation_between(t0, t1) is the same over t0 <= event_time < t1 (NULL: open end);
-- the view request_reconciliation is it over all time.
CREATE OR REPLACE MACRO request_reconciliation_between(t0, t1) AS TABLE
WITH per_request AS (
    SELECT
        engine_id,
        request_id,
        any_value(vllm_request_histogram) AS histogram,
        any_value(vllm_request_draft_tokens) AS reported_draft_tokens,
        any_value(vllm_request_accepted_per_step) AS reported_accepted_per_step,
        vllm_accepted_per_draft(k_sched, accepted, step_index) AS accepted_per_step,
        num_skipped(kind) AS skips,
        CAST(count(*) FILTER (WHERE is_grammar_invalid(kind)) AS BIGINT) AS grammar_steps,
        CAST(count(*) FILTER (WHERE kind = 'k_zero') AS BIGINT) AS k_zero_steps
    FROM request_steps_between(t0, t1)
    GROUP BY engine_id, request_id
), reported AS (
    SELECT
        *,
        CAST(list_sum(histogram) AS BIGINT) AS reported_drafts,
        CAST(list_sum(list_transform(range(len(histogram)), lambda j: j * histogram[j + 1])) AS BIGINT)
            AS reported_accepted_tokens
    FROM per_request
)
SELECT
    a.engine_id,
    a.model,
    a.method,
    a.num_spec_tokens,
    a.request_id,
    r.reported_drafts AS vllm_reported_drafts,
    CAST(r.reported_draft_tokens AS BIGINT) AS vllm_reported_draft_tokens,
    r.reported_accepted_tokens AS vllm_reported_accepted_tokens,
    acceptance_rate(r.reported_accepted_tokens, r.reported_draft_tokens) AS vllm_reported_acceptance_rate,
    r.reported_accepted_per_step AS vllm_reported_accepted_per_step,
    a.vllm_num_drafts,
    a.vllm_num_draft_tokens,
    a.vllm_num_accepted_tokens,
    coalesce(r.accepted_per_step, []) AS vllm_accepted_per_step,
    CASE WHEN r.histogram IS NOT NULL THEN
        (a.vllm_num_drafts, a.vllm_num_draft_tokens, a.vllm_num_accepted_tokens)
            IS DISTINCT FROM (r.reported_drafts, r.reported_draft_tokens, r.reported_accepted_tokens)
        OR (len(r.reported_accepted_per_step) > 0
            AND r.reported_accepted_per_step IS DISTINCT FROM coalesce(r.accepted_per_step, []))
    END AS differs,
    a.num_drafts,
    a.num_draft_tokens,
    a.num_accepted_tokens,
    acceptance_rate(a.num_accepted_tokens, a.num_draft_tokens) AS acceptance_rate,
    r.skips,
    r.grammar_steps,
    r.k_zero_steps,
    CASE WHEN (a.num_drafts, a.num_draft_tokens, a.num_accepted_tokens)
              IS DISTINCT FROM (a.vllm_num_drafts, a.vllm_num_draft_tokens, a.vllm_num_accepted_tokens) THEN
        concat_ws(', ', CASE WHEN r.skips > 0 THEN 'skipped for length' END,
                  CASE WHEN r.grammar_steps > 0 THEN 'grammar' END,
                  CASE WHEN r.k_zero_steps > 0 THEN 'K = 0' END)
    ELSE '' END AS why
FROM request_acceptance_between(t0, t1) AS a
JOIN reported AS r USING (engine_id, request_id);

CREATE OR REPLACE VIEW request_reconciliation AS
FROM request_reconciliation_between(NULL, NULL)
ORDER BY engine_id, request_id;

COMMENT ON MACRO TABLE request_reconciliation_between IS 'Per request: the numbers vLLM kept for it (with --per-request-spec-decode-metrics), the same rebuilt from the events, and the corrected ones, with what makes them differ; window t0 <= event_time < t1.';
COMMENT ON VIEW request_reconciliation IS 'Per request: the numbers vLLM kept for it (with --per-request-spec-decode-metrics), the same rebuilt from the events, and the corrected ones, with what makes them differ.';
