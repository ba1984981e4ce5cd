-- requests: how a request's own acceptance is bucketed, and when it stands out from its group's.
--
-- Scalar macros over one request's corrected acceptance rate (acceptance_rate of its accepted and
-- draft tokens) and its group's pooled rate; the views acceptance_histogram and request_outliers
-- and the report (reports/data.py) use them.
--
-- Example:
--   SELECT rate_bucket(0.55, 10) AS bucket, is_outlier(0.1, 0.6, 12, 0.3, 8) AS outlier, outlier_direction(0.1, 0.6) AS direction
--
-- Columns:
--   rate_bucket(rate, buckets)          the 0-based bucket of a rate among `buckets` equal-width ones;
--                                       a rate of 1 goes in the last (INTEGER)
--   is_outlier(rate, group_rate, drafts, margin, min_drafts)
--                                       a request with at least min_drafts corrected drafts whose
--                                       rate is margin or more from its group's (BOOLEAN)
--   outlier_direction(rate, group_rate) 'low' below the group's rate, 'high' otherwise (VARCHAR)
CREATE OR REPLACE MACRO rate_bucket(rate, buckets) AS
    CAST(least(floor(rate * buckets), buckets - 1) AS INTEGER);

CREATE OR REPLACE MACRO is_outlier(rate, group_rate, drafts, margin, min_drafts) AS
    drafts >= min_drafts AND abs(rate - group_rate) >= margin;

CREATE OR REPLACE MACRO outlier_direction(rate, group_rate) AS
    CASE WHEN rate < group_rate THEN 'low' ELSE 'high' END;

COMMENT ON MACRO rate_bucket IS 'The 0-based bucket of a rate among buckets equal-width ones; 1 goes in the last.';
COMMENT ON MACRO is_outlier IS 'At least min_drafts corrected drafts, and a rate margin or more from the group''s.';
COMMENT ON MACRO outlier_direction IS '''low'' below the group''s rate, ''high'' otherwise.';
