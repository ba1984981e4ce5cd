"""Engine-core side: one step event per engine step, from the scheduler's own data.

``Scheduler.update_from_output`` knows, per request, the draft slots it scheduled, the -1
pads of grammar-invalid drafts (async) and the sampled tokens; the wrapper reads them before
vLLM truncates at stop tokens (``accepted``) and after (``emitted``). ``update_draft_token_ids``
(sync) shows how many drafts the grammar kept. ``schedule`` tags its output with the step
index. The worker's drafting decision arrives on the ``ModelRunnerOutput``.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

from emitter.publisher import EventPublisher, StepRecord
from emitter.recorder import DraftDecision, StepRecorder, Verified
from emitter.settings import EmitterSettings
from emitter.vllm.patching import Guard, vllm_version, wrap
from emitter.vllm.worker import DECISION_ATTR

OBSERVER_ATTR = "_specmetrics_observer"
STEP_ATTR = "specmetrics_step_index"


class EngineObserver:
    """Per scheduler (one per engine): the recorder, the step envelope, the publisher."""

    def __init__(self, scheduler: Any, settings: EmitterSettings, publisher: EventPublisher) -> None:
        config = scheduler.vllm_config
        spec = config.speculative_config
        parallel = config.parallel_config
        drafter = getattr(spec, "draft_model_config", None)
        served = config.model_config.served_model_name
        self.context: dict[str, Any] = {
            "engine_instance": settings.engine_label or f"{socket.gethostname()}-{os.getpid()}",
            "dp_rank": int(getattr(parallel, "data_parallel_index", getattr(parallel, "data_parallel_rank", 0)) or 0),
            "model": str(served[0] if isinstance(served, list | tuple) else served or config.model_config.model),
            "vllm_version": vllm_version(),
            "method": str(spec.method),
            "num_spec_tokens": int(spec.num_speculative_tokens),
            "drafter_max_len": int(drafter.max_model_len if drafter is not None else config.model_config.max_model_len),
        }
        self.recorder = StepRecorder(max_model_len=int(scheduler.max_model_len))
        self.publisher = publisher
        self.boot = uuid.uuid4().hex[:16]
        self.num_sampled = int(getattr(scheduler, "num_sampled_tokens_per_step", 1))

    def before(self, scheduler: Any, so: Any, mro: Any) -> tuple[list[Verified], list[int]]:
        """Read what was verified, before vLLM updates requests and truncates at stop tokens."""
        spec = so.scheduled_spec_decode_tokens
        invalid = so.num_invalid_spec_tokens or {}
        sampled = mro.sampled_token_ids
        index = mro.req_id_to_index
        requests = scheduler.requests
        rows: list[Verified] = []
        positions: list[int] = []
        if not sampled:
            return rows, positions
        for req_id, num_scheduled in so.num_scheduled_tokens.items():
            drafts = spec.get(req_id)
            if not drafts and num_scheduled != 1:
                continue  # a prefill chunk
            request = requests.get(req_id)
            if request is None or request.is_finished() or (not drafts and not request.num_output_tokens):
                continue
            i = index.get(req_id)
            if i is None or not sampled[i]:
                continue
            k_sched = len(drafts) if drafts else 0
            accepted = max(len(sampled[i]) - self.num_sampled, 0) if k_sched else 0
            rows.append(Verified(req_id, k_sched, invalid.get(req_id, 0), accepted, request.num_tokens))
            positions.append(i)
        return rows, positions

    def after(self, so: Any, mro: Any, rows: list[Verified], positions: list[int], step_index: int) -> None:
        sampled = mro.sampled_token_ids
        emitted = [len(sampled[i]) for i in positions]
        previous = self.recorder.decision
        outcomes = self.recorder.classify(rows, emitted)
        decision = getattr(mro, DECISION_ATTR, None)
        self.recorder.decision = DraftDecision(*decision) if decision is not None else None
        if not rows:
            return
        envelope = {
            **self.context,
            "event_id": f"{self.boot}-{step_index}",
            "step_index": step_index,
            "event_time_us": time.time_ns() // 1000,
            "batch_max_seq_len": previous.max_seq_len if previous is not None and previous.max_seq_len >= 0 else None,
        }
        if previous is not None:
            envelope["drafter_max_len"] = previous.drafter_max_len
        self.publisher.publish(StepRecord(envelope, outcomes))


def install(settings: EmitterSettings, publisher: Callable[[], EventPublisher], flush: Callable[[], None]
            ) -> list[str]:
    """Wrap the V1 scheduler (``AsyncScheduler`` inherits these) and flush before the engine core
    shuts down; returns what cannot be observed."""
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.engine.core import EngineCore

    guard = Guard("speculative decoding outcomes (scheduler)")

    def observer(scheduler: Any) -> EngineObserver | None:
        found = scheduler.__dict__.get(OBSERVER_ATTR, False)
        if found is False:
            spec = scheduler.vllm_config.speculative_config
            found = None if spec is None or not spec.num_speculative_tokens else EngineObserver(
                scheduler, settings, publisher())
            setattr(scheduler, OBSERVER_ATTR, found)
        return found  # type: ignore[no-any-return]

    def make_schedule(original: Callable[..., Any]) -> Callable[..., Any]:
        def schedule(self: Any, *args: Any, **kwargs: Any) -> Any:
            output = original(self, *args, **kwargs)
            if guard.enabled:
                try:
                    setattr(output, STEP_ATTR, int(self.current_step))
                except Exception as exc:
                    guard.failed(exc)
            return output

        return schedule

    def make_update(original: Callable[..., Any]) -> Callable[..., Any]:
        def update_from_output(self: Any, scheduler_output: Any, model_runner_output: Any) -> Any:
            seen = None
            if guard.enabled:
                try:
                    obs = observer(self)
                    if obs is not None:
                        seen = obs, obs.before(self, scheduler_output, model_runner_output)
                except Exception as exc:
                    guard.failed(exc)
            result = original(self, scheduler_output, model_runner_output)
            if seen is not None and guard.enabled:
                try:
                    obs, (rows, positions) = seen
                    step = getattr(scheduler_output, STEP_ATTR, None)
                    obs.after(scheduler_output, model_runner_output, rows, positions,
                              int(self.current_step if step is None else step))
                except Exception as exc:
                    guard.failed(exc)
            return result

        return update_from_output

    def make_drafts(original: Callable[..., Any]) -> Callable[..., Any]:
        def update_draft_token_ids(self: Any, draft_token_ids: Any) -> Any:
            proposed = None
            if guard.enabled:
                try:
                    proposed = [(r, len(t)) for r, t in zip(draft_token_ids.req_ids, draft_token_ids.draft_token_ids,
                                                             strict=False)]
                except Exception as exc:
                    guard.failed(exc)
            result = original(self, draft_token_ids)
            if proposed and guard.enabled:
                try:
                    obs = observer(self)
                    if obs is not None:
                        for req_id, count in proposed:
                            request = self.requests.get(req_id)
                            if request is not None and not request.is_finished():
                                obs.recorder.drafts_validated(req_id, count, len(request.spec_token_ids))
                except Exception as exc:
                    guard.failed(exc)
            return result

        return update_draft_token_ids

    def make_shutdown(original: Callable[..., Any]) -> Callable[..., Any]:
        def shutdown(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:  # first: vLLM may kill the process while its executor shuts down
                flush()
            except Exception as exc:
                guard.failed(exc)
            return original(self, *args, **kwargs)

        return shutdown

    missing = []
    if not wrap(EngineCore, "shutdown", ("self",), "the last steps before shutdown (flushed at exit instead)",
                make_shutdown):
        missing.append("flush on engine shutdown")
    if not wrap(Scheduler, "update_from_output", ("self", "scheduler_output", "model_runner_output"),
                "every speculative decoding outcome (no events at all)", make_update):
        missing.append("all outcomes")
    if not wrap(Scheduler, "schedule", ("self",), "the step index of async outputs", make_schedule):
        missing.append("step index")
    if not wrap(Scheduler, "update_draft_token_ids", ("self", "draft_token_ids"),
                "grammar-truncated drafts in sync scheduling (grammar_invalid, k_zero grammar_truncated)",
                make_drafts):
        missing.append("grammar truncation")
    return missing
