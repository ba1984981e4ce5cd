-- drafts: what counts as a draft, and the draft counts every metric is built from.
--
-- Scalar macros: every view, the report (reports/data.py), the time windows
-- (specmetrics/windows.py) and the rollups call these, so the corrected and the vLLM-compatible
-- definitions are written here once. is_draft and is_vllm_draft decide per request-step; the
-- counts are aggregates over rows of request-steps, each row weighted by request_steps (the
-- request-steps it stands for: 1, the default, for request_steps' rows; the count of a histogram
-- or rollup row). A count over no draft is 0, never NULL. The per-position counts take a 0-based
-- position i.
--
-- Example:
--   SELECT num_drafts(kind, k_valid) AS num_drafts, vllm_num_drafts(k_sched) AS vllm_num_drafts FROM request_steps
--
-- Columns:
--   is_draft(kind, k_valid)                      a draft in the corrected metrics: kind = 'drafted',
--                                                or kind = 'grammar_invalid' or 'grammar_rejected' with
--                                                k_valid > 0 (BOOLEAN)
--   is_grammar_invalid(kind)                     some drafts broke the grammar: kind = 'grammar_invalid' or
--                                                'grammar_rejected' (BOOLEAN)
--   is_vllm_draft(k_sched)                       a draft for vLLM 0.32.0's counters: k_sched > 0, whatever
--                                                the kind (placeholders and all-invalid drafts included)
--   num_drafts(kind, k_valid, request_steps)     corrected drafts (BIGINT)
--   num_draft_tokens(kind, k_valid, request_steps)   sum of k_valid over corrected drafts (BIGINT)
--   num_accepted_tokens(kind, k_valid, accepted, request_steps)   sum of accepted over them (BIGINT)
--   vllm_num_drafts(k_sched, request_steps)      vLLM drafts (BIGINT)
--   vllm_draft_tokens(kind, k_sched, k_valid)   the draft tokens vLLM counts for one request-step: k_sched
--                                                less its -1 pads, which is k_valid but for grammar_rejected,
--                                                where vLLM also counts the invalid draft it verified
--                                                (k_sched) (INTEGER)
--   vllm_num_draft_tokens(kind, k_sched, k_valid, request_steps)   sum of vllm_draft_tokens over vLLM
--                                                drafts (BIGINT)
--   vllm_num_accepted_tokens(k_sched, accepted, request_steps)   sum of accepted over them (BIGINT)
--   num_reached(kind, k_valid, position, request_steps)   corrected drafts with k_valid >= i + 1 (BIGINT)
--   num_accepted_at(kind, k_valid, accepted, position, request_steps)   corrected drafts with
--                                                accepted >= i + 1 (BIGINT)
--   vllm_num_accepted_at(k_sched, accepted, position, request_steps)   vLLM drafts with
--                                                accepted >= i + 1: vLLM's per-position counter (BIGINT)
--   vllm_accepted_per_draft(k_sched, accepted, step_index)   the accepted tokens of each vLLM draft,
--                                                in step order: vLLM's per-step list of a request
--                                                (INTEGER[]; NULL when none)
--   acceptance_rate(accepted_tokens, draft_tokens)   accepted_tokens / draft_tokens (DOUBLE; NULL when
--                                                no draft token)
--   mean_acceptance_length(accepted_tokens, drafts)   1 + accepted_tokens / drafts (DOUBLE; NULL when no
--                                                draft)
--   rate_over_drafts(accepted_at, drafts)        a position's rate as vLLM defines it: drafts accepted at
--                                                the position / all drafts (DOUBLE; NULL when no draft)
--   rate_conditional(accepted_at, reached)       a position's conditional rate: drafts accepted at the
--                                                position / drafts that reached it (DOUBLE; NULL when none)
CREATE OR REPLACE MACRO is_grammar_invalid(kind) AS
    COALESCE(kind IN ('grammar_invalid', 'grammar_rejected'), false);

CREATE OR REPLACE MACRO is_draft(kind, k_valid) AS
    COALESCE(kind = 'drafted' OR (is_grammar_invalid(kind) AND k_valid > 0), false);

CREATE OR REPLACE MACRO is_vllm_draft(k_sched) AS
    COALESCE(k_sched > 0, false);

CREATE OR REPLACE MACRO num_drafts(kind, k_valid, request_steps := 1) AS
    CAST(coalesce(sum(request_steps) FILTER (WHERE is_draft(kind, k_valid)), 0) AS BIGINT);

CREATE OR REPLACE MACRO num_draft_tokens(kind, k_valid, request_steps := 1) AS
    CAST(coalesce(sum(request_steps * k_valid) FILTER (WHERE is_draft(kind, k_valid)), 0) AS BIGINT);

CREATE OR REPLACE MACRO num_accepted_tokens(kind, k_valid, accepted, request_steps := 1) AS
    CAST(coalesce(sum(request_steps * accepted) FILTER (WHERE is_draft(kind, k_valid)), 0) AS BIGINT);

CREATE OR REPLACE MACRO vllm_num_drafts(k_sched, request_steps := 1) AS
    CAST(coalesce(sum(request_steps) FILTER (WHERE is_vllm_draft(k_sched)), 0) AS BIGINT);

CREATE OR REPLACE MACRO vllm_draft_tokens(kind, k_sched, k_valid) AS
    CASE WHEN kind = 'grammar_rejected' THEN k_sched ELSE k_valid END;

CREATE OR REPLACE MACRO vllm_num_draft_tokens(kind, k_sched, k_valid, request_steps := 1) AS
    CAST(coalesce(sum(request_steps * vllm_draft_tokens(kind, k_sched, k_valid)) FILTER (WHERE is_vllm_draft(k_sched)),
                  0) AS BIGINT);

CREATE OR REPLACE MACRO vllm_num_accepted_tokens(k_sched, accepted, request_steps := 1) AS
    CAST(coalesce(sum(request_steps * accepted) FILTER (WHERE is_vllm_draft(k_sched)), 0) AS BIGINT);

CREATE OR REPLACE MACRO num_reached(kind, k_valid, position, request_steps := 1) AS
    CAST(coalesce(sum(request_steps) FILTER (WHERE is_draft(kind, k_valid) AND k_valid > position), 0) AS BIGINT);

CREATE OR REPLACE MACRO num_accepted_at(kind, k_valid, accepted, position, request_steps := 1) AS
    CAST(coalesce(sum(request_steps) FILTER (WHERE is_draft(kind, k_valid) AND accepted > position), 0) AS BIGINT);

CREATE OR REPLACE MACRO vllm_num_accepted_at(k_sched, accepted, position, request_steps := 1) AS
    CAST(coalesce(sum(request_steps) FILTER (WHERE is_vllm_draft(k_sched) AND accepted > position), 0) AS BIGINT);

CREATE OR REPLACE MACRO vllm_accepted_per_draft(k_sched, accepted, step_index) AS
    list(accepted ORDER BY step_index) FILTER (WHERE is_vllm_draft(k_sched));

CREATE OR REPLACE MACRO acceptance_rate(accepted_tokens, draft_tokens) AS
    accepted_tokens / nullif(draft_tokens, 0);

CREATE OR REPLACE MACRO mean_acceptance_length(accepted_tokens, drafts) AS
    1 + accepted_tokens / nullif(drafts, 0);

CREATE OR REPLACE MACRO rate_over_drafts(accepted_at, drafts) AS
    accepted_at / nullif(drafts, 0);

CREATE OR REPLACE MACRO rate_conditional(accepted_at, reached) AS
    accepted_at / nullif(reached, 0);

COMMENT ON MACRO is_draft IS 'A draft in the corrected metrics: kind drafted, or grammar_invalid or grammar_rejected with k_valid > 0.';
COMMENT ON MACRO is_grammar_invalid IS 'Some drafts broke the grammar: kind grammar_invalid or grammar_rejected.';
COMMENT ON MACRO is_vllm_draft IS 'A draft for vLLM 0.32.0''s counters: k_sched > 0, whatever the kind.';
COMMENT ON MACRO num_drafts IS 'Corrected drafts among rows of request-steps (aggregate; request_steps weights a row).';
COMMENT ON MACRO num_draft_tokens IS 'Sum of k_valid over corrected drafts (aggregate; request_steps weights a row).';
COMMENT ON MACRO num_accepted_tokens IS 'Sum of accepted over corrected drafts (aggregate; request_steps weights a row).';
COMMENT ON MACRO vllm_num_drafts IS 'Drafts as vLLM 0.32.0 counts them, k_sched > 0 (aggregate; request_steps weights a row).';
COMMENT ON MACRO vllm_draft_tokens IS 'The draft tokens vLLM counts for one request-step: k_sched less its -1 pads (k_valid, but k_sched for grammar_rejected).';
COMMENT ON MACRO vllm_num_draft_tokens IS 'Sum of vllm_draft_tokens over vLLM drafts (aggregate; request_steps weights a row).';
COMMENT ON MACRO vllm_num_accepted_tokens IS 'Sum of accepted over vLLM drafts (aggregate; request_steps weights a row).';
COMMENT ON MACRO num_reached IS 'Corrected drafts with k_valid > position (aggregate; 0-based position; request_steps weights a row).';
COMMENT ON MACRO num_accepted_at IS 'Corrected drafts with accepted > position (aggregate; 0-based position; request_steps weights a row).';
COMMENT ON MACRO vllm_num_accepted_at IS 'vLLM drafts with accepted > position: vLLM''s per-position counter (aggregate; request_steps weights a row).';
COMMENT ON MACRO vllm_accepted_per_draft IS 'The accepted tokens of each vLLM draft (k_sched > 0) in step order (aggregate).';
COMMENT ON MACRO acceptance_rate IS 'accepted_tokens / draft_tokens; NULL when there is no draft token.';
COMMENT ON MACRO mean_acceptance_length IS '1 + accepted_tokens / drafts; NULL when there is no draft.';
COMMENT ON MACRO rate_over_drafts IS 'A position''s rate as vLLM defines it: drafts accepted at the position / all drafts; NULL when there is no draft.';
COMMENT ON MACRO rate_conditional IS 'A position''s conditional rate: drafts accepted at the position / drafts that reached it; NULL when none reached it.';
