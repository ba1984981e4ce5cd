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
--
-- How a window splits for the stored rollups, which count whole minutes: the whole minutes
-- [whole_minutes_start(t0), whole_minutes_end(t1)) come from the rollups, the partial first
-- minute [first_part_start(t0), first_part_end(t0, t1)) and the partial last minute
-- [last_part_start(t0, t1), last_part_end(t1)) from the raw rows (an open end gives an empty part,
-- the epoch to the epoch, which no file holds):
--   whole_minutes_start(t0)                  the first whole minute at or after t0 (TIMESTAMP)
--   whole_minutes_end(t1)                    the start of the minute holding t1 (TIMESTAMP)
--   first_part_start(t0)                     start of the partial first minute (TIMESTAMP)
--   first_part_end(t0, t1)                   end of the partial first minute (TIMESTAMP)
--   last_part_start(t0, t1)                  start of the partial last minute (TIMESTAMP)
--   last_part_end(t1)                        end of the partial last minute (TIMESTAMP)
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

CREATE OR REPLACE MACRO whole_minutes_start(t0) AS
    date_trunc('minute', utc_bound(t0) + INTERVAL 59999999 MICROSECOND);

CREATE OR REPLACE MACRO whole_minutes_end(t1) AS
    date_trunc('minute', utc_bound(t1));

CREATE OR REPLACE MACRO first_part_start(t0) AS
    CASE WHEN t0 IS NULL THEN TIMESTAMP '1970-01-01' ELSE utc_bound(t0) END;

CREATE OR REPLACE MACRO first_part_end(t0, t1) AS
    CASE WHEN t0 IS NULL THEN TIMESTAMP '1970-01-01' ELSE least(whole_minutes_start(t0), utc_bound(t1)) END;

-- unless the first part holds it
CREATE OR REPLACE MACRO last_part_start(t0, t1) AS
    CASE WHEN t1 IS NULL THEN TIMESTAMP '1970-01-01'
         ELSE greatest(whole_minutes_end(t1), whole_minutes_start(t0)) END;

CREATE OR REPLACE MACRO last_part_end(t1) AS
    CASE WHEN t1 IS NULL THEN TIMESTAMP '1970-01-01' ELSE utc_bound(t1) END;

COMMENT ON MACRO bucket_us IS 'A time bucket''s width in microseconds; an error naming the macro unless it is a positive interval.';
COMMENT ON MACRO utc_bound IS 'A window bound (timestamp or text, with or without an offset) as a UTC TIMESTAMP.';
COMMENT ON MACRO in_window IS 't0 <= event_time < t1 (NULL: open end), with the dt and hour partition keys pruned to the window.';
COMMENT ON MACRO whole_minutes_start IS 'The first whole minute at or after t0: where the rollups of a window start.';
COMMENT ON MACRO whole_minutes_end IS 'The start of the minute holding t1: where the rollups of a window end.';
COMMENT ON MACRO first_part_start IS 'Start of the partial first minute of a window, read from raw rows (the epoch without t0).';
COMMENT ON MACRO first_part_end IS 'End of the partial first minute of a window, read from raw rows (the epoch without t0).';
COMMENT ON MACRO last_part_start IS 'Start of the partial last minute of a window, read from raw rows (the epoch without t1).';
COMMENT ON MACRO last_part_end IS 'End of the partial last minute of a window, read from raw rows (the epoch without t1).';
