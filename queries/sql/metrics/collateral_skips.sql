-- collateral_skips: the requests that lost speculation to a longer one in their batch, per group.
--
-- vLLM decides for the whole batch whether the drafter runs, from the batch's longest sequence:
-- when it plus K does not fit the drafter, every request of the batch verifies placeholders. A
-- skip is collateral when the request's own length (seq_len, schema 1.5) fit: it would have
-- drafted alone. One row per group with request-steps; skips of unknown length (files written
-- before schema 1.5, or a request first seen after a dropped step) are counted apart.
--
-- What the collateral skips cost: the draft tokens they lost (their placeholder slots), and the
-- tokens they would have accepted had they drafted, estimated from each request's own acceptance
-- rate where it drafted (in the same window), or from its group's for a request that never
-- drafted. With those, the group's corrected acceptance rate and mean acceptance length had the
-- collateral skips drafted, next to what they were.
--
-- Example:
--   SELECT engine_id, skips, collateral_skips, collateral_share, lost_draft_tokens, estimated_accepted_tokens FROM collateral_skips ORDER BY collateral_skips DESC
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   request_steps               request-steps of the group (BIGINT)
--   skips                       request-steps skipped for length (BIGINT)
--   collateral_skips            of those, the request's own length fit the drafter (BIGINT)
--   own_skips                   of those, the request's own length did not fit (BIGINT)
--   unknown_skips               of those, the request's length is not known (BIGINT)
--   collateral_share            collateral_skips / skips (DOUBLE; NULL without skips)
--   lost_draft_tokens           placeholder slots of the collateral skips: draft tokens the drafter
--                               would have proposed (BIGINT)
--   estimated_accepted_tokens   of those, the tokens the requests would have accepted, at their own
--                               acceptance rate (DOUBLE; NULL without collateral skips)
--   estimated_from_group        collateral skips of requests that never drafted, estimated at the
--                               group's rate (BIGINT)
--   num_drafts, num_draft_tokens, num_accepted_tokens   corrected counts, as they were (BIGINT)
--   acceptance_rate, mean_acceptance_length             corrected, as they were (DOUBLE)
--   acceptance_rate_had_drafted           the corrected rate had the collateral skips drafted: their
--                                         lost draft tokens and estimated accepted tokens added (DOUBLE)
--   mean_acceptance_length_had_drafted    the same for the mean acceptance length (DOUBLE)
--
-- collateral_skips_between(t0, t1, source := NULL) is the same over t0 <= event_time < t1 (NULL:
-- open end), or over the counts per request of the table named source (request_counts_of_table:
-- how `specmetrics report` computes its section); the view collateral_skips is it over all time;
-- collateral_skips_timeline the same per time bucket.
CREATE OR REPLACE MACRO collateral_skips_between(t0, t1, source := NULL) AS TABLE
SELECT * EXCLUDE (bucket_index)
FROM collateral_skip_counts(NULL, t0, t1, source);

CREATE OR REPLACE VIEW collateral_skips AS
FROM collateral_skips_between(NULL, NULL)
ORDER BY engine_id, model, method, num_spec_tokens;

COMMENT ON MACRO TABLE collateral_skips_between IS 'Skips for length per group, told apart by the length of each request alone: collateral (it fit the drafter), own, unknown; the draft tokens the collateral ones lost, the tokens they would have accepted, and the acceptance had they drafted; window t0 <= event_time < t1.';
COMMENT ON VIEW collateral_skips IS 'Skips for length per group, told apart by the length of each request alone: collateral (it fit the drafter), own, unknown; the draft tokens the collateral ones lost, the tokens they would have accepted, and the acceptance had they drafted.';
