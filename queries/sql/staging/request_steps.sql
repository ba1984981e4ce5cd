-- request_steps: one row per request-step, typed and ready for the metrics.
--
-- all_request_steps without the rows of kind 'vllm_only' (steps the plugin did not see, which the
-- metrics cannot count): every metric reads this view.
--
-- request_steps_between(t0, t1) is request_steps over t0 <= event_time < t1 (NULL: open end): every
-- *_between macro of the later layers reads through it, and it skips the dt partitions outside.
--
-- Example:
--   SELECT kind, count(*) AS request_steps FROM request_steps GROUP BY kind ORDER BY kind
--
-- Columns:
--   schema_version, event_id         contract version; id of the step event the row came from
--   engine_id                        "<engine_instance>/dp<dp_rank>"
--   engine_instance, dp_rank         the engine instance label and its data-parallel rank
--   model, vllm_version, method      target model, vLLM version, speculative method
--   num_spec_tokens                  configured K (num_speculative_tokens)
--   drafter_max_len                  the drafter's max model length (NULL when unknown)
--   step_index, event_time           engine step counter; when the step was processed (UTC, no tz)
--   dt, hour                         the hive partition (UTC date and hour of event_time); filter on
--                                    them to read fewer files
--   batch_max_seq_len                longest sequence in the batch, as the drafter-fit check saw it
--   drafts_verified                  draft tokens the target verified in the whole step, when adaptive
--                                    verification (Model Runner V2) verified only some of those
--                                    scheduled: the rows' k_valid are then upper bounds (see the view
--                                    adaptive_verification); NULL otherwise, and in files written
--                                    before schema 1.1
--   max_model_len                    the target's max model length as the engine served it (NULL in
--                                    files written before schema 1.3)
--   context_cap_from                 the target's max model length before vLLM lowered it to the
--                                    drafter's (Model Runner V2 cannot skip drafting for longer
--                                    sequences; see the view context_caps); NULL when not lowered
--   skip_check                       could a skip for length be seen for the drafts verified at this
--                                    step: 'observed' (the worker's decision arrived), 'none' (Model
--                                    Runner V2, which never skips), 'unobserved' (skips unknown); NULL
--                                    in files written before schema 1.3
--   log_source, log_partition,       where the step event sat in the log it was ingested from: the
--   log_offset                       name under which the table keeps that log (NULL in files written
--                                    before schema 1.9), its partition and offset
--   request_id                       vLLM request id
--   kind                             'drafted' | 'skipped_for_length' | 'grammar_invalid' | 'k_zero' | 'grammar_rejected'
--   k_zero_reason                    NULL unless kind = 'k_zero': 'no_proposal', 'length_trim',
--                                    'grammar_truncated', 'schedule', 'unknown', 'verify_budget'
--                                    (drafts scheduled, none verified: adaptive verification),
--                                    'skip_drafts' (the scheduler told the drafter to skip)
--   k_sched                          draft slots scheduled (placeholders and -1 pads included)
--   k_valid                          k_sched minus -1 pads: the drafts the target verified, except
--                                    for k_zero 'verify_budget' (none verified; vLLM counts them)
--   k_invalid                        drafts invalidated by the grammar
--   accepted                         drafts accepted (len(sampled_token_ids) - 1)
--   emitted                          tokens committed after stop handling
--   seq_len                          the request's own sequence length where the drafter-fit check
--                                    decided about the drafts verified now (after the request's
--                                    previous step): it alone fits the drafter when
--                                    seq_len + num_spec_tokens <= drafter_max_len. NULL when not
--                                    known, and in files written before schema 1.5
--   vllm_num_drafts                  vLLM's own count of drafts at the whole step (its SpecDecodingStats,
--                                    as vLLM computed it; the same on every row of the step), for the
--                                    audit of the plugin's vLLM-compatible numbers (the view
--                                    vllm_audit); NULL where vLLM computed none (vllm_counts_missing
--                                    says why) and in files written before schema 1.6
--   vllm_num_draft_tokens            vLLM's own count of draft tokens at the step (as vllm_num_drafts)
--   vllm_num_accepted_tokens         vLLM's own count of accepted tokens at the step (as vllm_num_drafts)
--   vllm_accepted_per_pos            vLLM's own drafts accepted past each position at the step, one
--                                    count per position (as vllm_num_drafts)
--   vllm_request_histogram           on the row of a request at the step it finished, when vLLM kept
--                                    per-request metrics (--per-request-spec-decode-metrics summary or
--                                    detailed; schema 1.7): vLLM's own count of the request's drafts by
--                                    accepted draft tokens j = 0 .. K; NULL on every other row
--   vllm_request_draft_tokens        on the same row: vLLM's own count of the request's draft tokens
--   vllm_request_accepted_per_step   on the same row, at the detailed level: the draft tokens vLLM
--                                    counted accepted at each of the request's verify steps, in order
--                                    (empty at the summary level)
--   vllm_request_drafted_per_step    the same for the draft tokens vLLM counted drafted
--   vllm_counts_missing              why a step has no vLLM counters: 'stats_off' (vLLM runs with
--                                    --disable-log-stats), 'not_returned' (the step's outputs held
--                                    no stats); NULL otherwise
--   is_draft                         counts as a draft in the corrected metrics (the macro is_draft):
--                                    kind = 'drafted', or kind = 'grammar_invalid' or 'grammar_rejected'
--                                    with k_valid > 0
--   is_vllm_draft                    counts as a draft for vLLM 0.32.0's counters (the macro
--                                    is_vllm_draft): k_sched > 0, whatever the kind (placeholders and
--                                    all-invalid drafts included)
CREATE OR REPLACE VIEW request_steps AS
SELECT * EXCLUDE (vllm_only)
FROM all_request_steps
WHERE kind <> 'vllm_only';

COMMENT ON VIEW request_steps IS 'One row per request-step: typed counts, partition keys, is_draft (corrected) and is_vllm_draft (vLLM 0.32.0) flags.';

-- request_steps_between(t0, t1): the rows of request_steps with t0 <= event_time < t1.
--
-- Every *_between macro of the later layers reads through this one. t0 and t1 are as in_window
-- takes them (definitions/time_window.sql): timestamps or text, UTC unless they carry an offset;
-- NULL leaves that end open, so request_steps_between(NULL, NULL) is request_steps. The dt and
-- hour partition keys are filtered too, so files outside the window are not read.
CREATE OR REPLACE MACRO request_steps_between(t0, t1) AS TABLE
SELECT *
FROM request_steps
WHERE in_window(event_time, dt, hour, t0, t1);

COMMENT ON MACRO TABLE request_steps_between IS 'request_steps with t0 <= event_time < t1 (NULL: open end); prunes dt and hour partitions.';
