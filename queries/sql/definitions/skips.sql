-- skips: what a skip for length is, and the skip share.
--
-- Scalar macros. A request-step was skipped for length when vLLM did not run the drafter for its
-- batch (the batch's longest sequence plus K did not fit the drafter) and the target verified
-- placeholders instead: kind = 'skipped_for_length'. num_skipped is an aggregate over rows of
-- request-steps, each row weighted by request_steps (1, the default, for request_steps' rows; the
-- count of a histogram or rollup row); a count over no skip is 0, never NULL.
--
-- Example:
--   SELECT skip_share(num_skipped(kind), count(*)) AS skip_share FROM request_steps
--
-- Columns:
--   is_skipped(kind)                        a request-step skipped for length (BOOLEAN)
--   num_skipped(kind, request_steps)        request-steps skipped for length (BIGINT)
--   skip_share(skipped, request_steps)      skipped / request_steps (DOUBLE; NULL when there is no
--                                           request-step)
--   is_collateral_skip(kind, seq_len, num_spec_tokens, drafter_max_len)
--                                           skipped although the request's own length fit the
--                                           drafter (seq_len + K <= drafter_max_len): a longer
--                                           request in its batch turned drafting off (BOOLEAN; false
--                                           when seq_len or drafter_max_len is unknown)
--   is_own_skip(kind, seq_len, num_spec_tokens, drafter_max_len)
--                                           skipped, and the request's own length did not fit the
--                                           drafter (BOOLEAN; false when either is unknown)
--   num_collateral_skips(kind, seq_len, num_spec_tokens, drafter_max_len, request_steps)
--                                           collateral skips (BIGINT)
--   num_own_skips(kind, seq_len, num_spec_tokens, drafter_max_len, request_steps)
--                                           skips for the request's own length (BIGINT)
--   num_lost_draft_tokens(kind, k_valid, seq_len, num_spec_tokens, drafter_max_len, request_steps)
--                                           the placeholder slots of collateral skips: draft tokens
--                                           the drafter would have proposed (BIGINT)
--   would_accept(lost_draft_tokens, request_rate, group_rate)
--                                           what lost draft tokens would have accepted: at the
--                                           request's own acceptance rate, or its group's where it
--                                           never drafted (DOUBLE; NULL when neither is known)
CREATE OR REPLACE MACRO is_skipped(kind) AS
    COALESCE(kind = 'skipped_for_length', false);

CREATE OR REPLACE MACRO num_skipped(kind, request_steps := 1) AS
    CAST(coalesce(sum(request_steps) FILTER (WHERE is_skipped(kind)), 0) AS BIGINT);

CREATE OR REPLACE MACRO skip_share(skipped, request_steps) AS
    skipped / nullif(request_steps, 0);

-- BIGINT: a length near 2**31 plus K overflows INTEGER.
CREATE OR REPLACE MACRO is_collateral_skip(kind, seq_len, num_spec_tokens, drafter_max_len) AS
    COALESCE(is_skipped(kind) AND CAST(seq_len AS BIGINT) + num_spec_tokens <= drafter_max_len, false);

CREATE OR REPLACE MACRO is_own_skip(kind, seq_len, num_spec_tokens, drafter_max_len) AS
    COALESCE(is_skipped(kind) AND CAST(seq_len AS BIGINT) + num_spec_tokens > drafter_max_len, false);

CREATE OR REPLACE MACRO num_collateral_skips(kind, seq_len, num_spec_tokens, drafter_max_len, request_steps := 1) AS
    CAST(coalesce(sum(request_steps) FILTER (WHERE is_collateral_skip(kind, seq_len, num_spec_tokens,
                                                                       drafter_max_len)), 0) AS BIGINT);

CREATE OR REPLACE MACRO num_own_skips(kind, seq_len, num_spec_tokens, drafter_max_len, request_steps := 1) AS
    CAST(coalesce(sum(request_steps) FILTER (WHERE is_own_skip(kind, seq_len, num_spec_tokens, drafter_max_len)), 0)
         AS BIGINT);

CREATE OR REPLACE MACRO num_lost_draft_tokens(kind, k_valid, seq_len, num_spec_tokens, drafter_max_len,
                                              request_steps := 1) AS
    CAST(coalesce(sum(request_steps * k_valid) FILTER (WHERE is_collateral_skip(kind, seq_len, num_spec_tokens,
                                                                                 drafter_max_len)), 0) AS BIGINT);

CREATE OR REPLACE MACRO would_accept(lost_draft_tokens, request_rate, group_rate) AS
    lost_draft_tokens * coalesce(request_rate, group_rate);

COMMENT ON MACRO is_skipped IS 'A request-step skipped for length: kind skipped_for_length (the drafter did not run; the target verified placeholders).';
COMMENT ON MACRO num_skipped IS 'Request-steps skipped for length (aggregate; request_steps weights a row).';
COMMENT ON MACRO is_collateral_skip IS 'Skipped for length although the request alone fit the drafter (seq_len + K <= drafter_max_len); false when either is unknown.';
COMMENT ON MACRO is_own_skip IS 'Skipped for length, and the request alone did not fit the drafter (seq_len + K > drafter_max_len); false when either is unknown.';
COMMENT ON MACRO num_collateral_skips IS 'Collateral skips (aggregate; request_steps weights a row).';
COMMENT ON MACRO num_own_skips IS 'Skips for the request''s own length (aggregate; request_steps weights a row).';
COMMENT ON MACRO num_lost_draft_tokens IS 'Placeholder slots (k_valid) of collateral skips: the draft tokens they lost (aggregate; request_steps weights a row).';
COMMENT ON MACRO would_accept IS 'lost_draft_tokens at the request''s own acceptance rate, or its group''s where it has none.';
COMMENT ON MACRO skip_share IS 'skipped / request_steps; NULL when there is no request-step.';
