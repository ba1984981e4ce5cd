-- acceptance_histogram: requests by their own corrected acceptance rate, per group.
--
-- Pooled numbers hide the requests that went wrong: very low acceptance tends to come with
-- garbled output, very high with repetitive loops. Each request with at least one corrected draft
-- token falls in one of `buckets` equal-width buckets of its acceptance rate (accepted / draft
-- tokens, corrected); a rate of exactly 1 goes in the last bucket. Every bucket of a group with
-- such requests has a row, empty ones with 0.
--
-- Example:
--   SELECT engine_id, lower_rate, upper_rate, requests, share FROM acceptance_histogram ORDER BY engine_id, bucket
--
-- Columns:
--   engine_id, model, method, num_spec_tokens   the group
--   bucket                  0-based bucket index (INTEGER)
--   lower_rate, upper_rate  the bucket's rates: lower_rate <= rate < upper_rate (the last bucket
--                           includes 1) (DOUBLE)
--   requests                requests whose corrected acceptance rate falls in the bucket (BIGINT)
--   share                   requests / the group's requests with a draft token (DOUBLE)
--
-- acceptance_histogram_between(t0, t1, buckets := 10, source := NULL) is the same over
-- t0 <= event_time < t1 (NULL: open end) with that many buckets, or over the counts per request of
-- the table named source (request_counts_of_table: how `specmetrics report` computes its chart);
-- the view acceptance_histogram is it over all time with 10 buckets.
CREATE OR REPLACE MACRO acceptance_histogram_between(t0, t1, buckets := 10, source := NULL) AS TABLE
WITH counted AS (FROM request_counts(NULL, t0, t1) WHERE source IS NULL),
per_request AS NOT MATERIALIZED (FROM counted UNION ALL FROM request_counts_of_table(source)),
counts AS (
    SELECT
        engine_id,
        model,
        method,
        num_spec_tokens,
        rate_bucket(acceptance_rate(num_accepted_tokens, num_draft_tokens), buckets) AS bucket,
        CAST(count(*) AS BIGINT) AS requests
    FROM per_request
    WHERE num_draft_tokens > 0
    GROUP BY ALL
),
-- from the buckets' counts, so that the requests are read once
groups AS (
    SELECT engine_id, model, method, num_spec_tokens, CAST(sum(requests) AS BIGINT) AS with_drafts
    FROM counts
    GROUP BY engine_id, model, method, num_spec_tokens
)
SELECT
    g.engine_id,
    g.model,
    g.method,
    g.num_spec_tokens,
    CAST(b.bucket AS INTEGER) AS bucket,
    b.bucket / buckets AS lower_rate,
    (b.bucket + 1) / buckets AS upper_rate,
    coalesce(c.requests, 0) AS requests,
    coalesce(c.requests, 0) / g.with_drafts AS share
FROM groups AS g
CROSS JOIN (SELECT unnest(range(CAST(buckets AS BIGINT))) AS bucket) AS b
LEFT JOIN counts AS c USING (engine_id, model, method, num_spec_tokens, bucket);

CREATE OR REPLACE VIEW acceptance_histogram AS
FROM acceptance_histogram_between(NULL, NULL)
ORDER BY engine_id, model, method, num_spec_tokens, bucket;

COMMENT ON MACRO TABLE acceptance_histogram_between IS 'Requests per bucket of their own corrected acceptance rate, per group (buckets: how many equal-width buckets, 10); window t0 <= event_time < t1.';
COMMENT ON VIEW acceptance_histogram IS 'Requests per bucket of their own corrected acceptance rate (10 buckets), per group.';
