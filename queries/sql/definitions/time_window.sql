-- time_window: the time-window predicate t0 <= event_time < t1 of every *_between macro.
--
-- Scalar macros. A bound t0 or t1 is a timestamp or text: without an offset it is UTC, with one
-- (TIMESTAMPTZ, '...+02:00') it is converted to UTC (connect() sets the session TimeZone to UTC);
-- NULL leaves that end open. in_window also compares the dt and hour partition keys with the
-- bounds, so DuckDB skips the files outside the window.
--
-- Example:
--   SELECT count(*) AS request_steps FROM request_steps WHERE in_window(event_time, dt, hour, TIMESTAMP '2025-01-01 10:00:00', NULL)
--
-- Columns:
--   utc_bound(t)                             t as a UTC TIMESTAMP (NULL stays NULL)
--   in_window(event_time, dt, hour, t0, t1)  t0 <= event_time < t1, and dt and hour not outside the
--                                            window (BOOLEAN)
--   bucket_us(bucket, macro)                 a time bucket's width in microseconds, or the error
--                                            '<macro>: bucket must be a positive interval' (BIGINT)
CREATE OR REPLACE MACRO utc_bound(t) AS
    CAST(CAST(t AS TIMESTAMPTZ) AS TIMESTAMP);

CREATE OR REPLACE MACRO in_window(event_time, dt, hour, t0, t1) AS
    (t0 IS NULL OR (event_time >= utc_bound(t0)
                    AND (dt > CAST(utc_bound(t0) AS DATE)
                         OR (dt = CAST(utc_bound(t0) AS DATE) AND hour >= hour(utc_bound(t0))))))
    AND (t1 IS NULL OR (event_time < utc_bound(t1)
                        AND (dt < CAST(utc_bound(t1) AS DATE)
                             OR (dt = CAST(utc_bound(t1) AS DATE) AND hour <= hour(utc_bound(t1))))));

CREATE OR REPLACE MACRO bucket_us(bucket, macro) AS
    CASE WHEN epoch_us(CAST(bucket AS INTERVAL)) > 0 THEN epoch_us(CAST(bucket AS INTERVAL))
         ELSE error(macro || ': bucket must be a positive interval') END;

COMMENT ON MACRO bucket_us IS 'A time bucket''s width in microseconds; an error naming the macro unless it is a positive interval.';
COMMENT ON MACRO utc_bound IS 'A window bound (timestamp or text, with or without an offset) as a UTC TIMESTAMP.';
COMMENT ON MACRO in_window IS 't0 <= event_time < t1 (NULL: open end), with the dt and hour partition keys pruned to the window.';
