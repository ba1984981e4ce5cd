"""A vLLM-shaped step stream: a batch of decoding requests per engine, speculation outcomes
drawn per request-step, batch-wide skip for length as vLLM decides it.

It writes encoded step messages through a :class:`emitter.sinks.Sink` and keeps exact
ground truth (:class:`EngineTruth`). It is for scale and tests; it never pretends to be vLLM
(``vllm_version`` says ``loadgen``).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator

import numpy as np

from specmetrics.emitter.loadgen.ground_truth import EngineTruth
from specmetrics.emitter.loadgen.spec import LoadSpec
from specmetrics.emitter.sinks.base import Sink
from specmetrics.schemas.codes import KindCode, KZeroReasonCode
from specmetrics.schemas.events import engine_id
from specmetrics.schemas.wire import OutcomeColumns, encode_step, event_time_us

_RANDOM_K_ZERO_REASONS = np.array(
    [KZeroReasonCode.NO_PROPOSAL.value, KZeroReasonCode.LENGTH_TRIM.value, KZeroReasonCode.SCHEDULE.value],
    dtype=np.uint8,
)
SEND_BATCH_STEPS = 256


class EngineSimulator:
    """One engine's stream of steps."""

    def __init__(self, spec: LoadSpec, index: int) -> None:
        self.spec = spec
        self.rng = np.random.default_rng([spec.seed, index])
        self.instance = f"{spec.engine_prefix}-{index}"
        self.engine_id = engine_id(self.instance, 0)
        self.truth = EngineTruth(spec.num_spec_tokens, spec.drafter_max_len,
                                 requests={} if spec.request_truth else None)
        # Ids of the engine instance, not only of the seed: two load generators with the same seed and
        # other prefixes (a second run beside the first) never share an event id or a request id.
        draw = int(self.rng.integers(0, 2**63))
        self._boot = hashlib.blake2b(f"{self.instance}/{draw}".encode(), digest_size=8).hexdigest()
        self._probs = np.array(spec.position_probs())
        self._step = 0
        b = spec.batch_size
        self._ctx = self.rng.integers(spec.prompt_len[0], spec.prompt_len[1] + 1, b)
        self._left = self.rng.integers(spec.output_len[0], spec.output_len[1] + 1, b)
        self._ids = [self._new_request_id() for _ in range(b)]
        self._t0 = event_time_us(spec.start_time)

    def _new_request_id(self) -> str:
        return f"chatcmpl-{self._boot[:8]}{self.rng.bytes(16).hex()}"

    def step(self) -> bytes:
        """Simulate one step; returns its encoded message."""
        spec, rng, k = self.spec, self.rng, self.spec.num_spec_tokens
        b = len(self._ids)
        batch_max = int(self._ctx.max())
        skipped = spec.drafter_max_len is not None and batch_max + k > spec.drafter_max_len
        kind = np.full(b, KindCode.DRAFTED.value, dtype=np.uint8)
        k_zero_reason = np.full(b, KZeroReasonCode.NONE.value, dtype=np.uint8)
        k_valid = np.full(b, k, dtype=np.int16)
        k_invalid = np.zeros(b, dtype=np.int16)
        if skipped:
            kind[:] = KindCode.SKIPPED_FOR_LENGTH.value
            accepted = np.zeros(b, dtype=np.int16)
        else:
            kzero = rng.random(b) < spec.k_zero_rate
            grammar = ~kzero & (rng.random(b) < spec.grammar_invalid_rate)
            k_invalid[grammar] = rng.integers(1, k + 1, int(grammar.sum()))
            k_valid -= k_invalid
            hits = rng.random((b, k)) < self._probs
            hits &= np.arange(k) < k_valid[:, None]
            accepted = np.cumprod(hits, axis=1).sum(axis=1).astype(np.int16)
            kind[grammar] = KindCode.GRAMMAR_INVALID.value
            kind[kzero] = KindCode.K_ZERO.value
            k_zero_reason[kzero] = rng.choice(_RANDOM_K_ZERO_REASONS, int(kzero.sum()))
            k_valid[kzero] = 0
            accepted[kzero] = 0
        k_sched = k_valid + k_invalid
        if spec.scheduling == "sync" and not skipped:
            k_sched = k_valid.copy()  # invalid drafts were truncated before scheduling
            all_truncated = (kind == KindCode.GRAMMAR_INVALID.value) & (k_valid == 0)
            kind[all_truncated] = KindCode.K_ZERO.value
            k_zero_reason[all_truncated] = KZeroReasonCode.GRAMMAR_TRUNCATED.value
        emitted = np.minimum(accepted + 1, self._left).astype(np.int16)
        cols = {
            "kind": kind, "k_zero_reason": k_zero_reason, "k_sched": k_sched, "k_valid": k_valid,
            "k_invalid": k_invalid, "accepted": accepted, "emitted": emitted,
        }
        self.truth.add_step(cols, skipped, self._ids, self._ctx)
        envelope = {
            "event_id": f"{self._boot}-{self._step}",
            "engine_instance": self.instance,
            "dp_rank": 0,
            "model": spec.model,
            "vllm_version": spec.vllm_version,
            "method": spec.method,
            "num_spec_tokens": k,
            "drafter_max_len": spec.drafter_max_len,
            "step_index": self._step,
            "event_time_us": self._t0 + int(self._step * spec.step_ms * 1000),
            "batch_max_seq_len": batch_max,
            "skip_check": "observed",  # a V1 runner whose every drafter-fit decision is seen
            "vllm_counts": _vllm_counts(k_sched, k_valid, accepted, k),
        }
        message = encode_step(envelope, OutcomeColumns(request_id=self._ids, **cols, seq_len=self._ctx))
        self._advance(emitted)
        return message

    def _advance(self, emitted: np.ndarray) -> None:
        self._step += 1
        self._ctx += emitted
        self._left -= emitted
        for i in np.flatnonzero(self._left <= 0):
            self._ids[i] = self._new_request_id()
            self._ctx[i] = self.rng.integers(self.spec.prompt_len[0], self.spec.prompt_len[1] + 1)
            self._left[i] = self.rng.integers(self.spec.output_len[0], self.spec.output_len[1] + 1)


def _vllm_counts(k_sched: np.ndarray, k_valid: np.ndarray, accepted: np.ndarray, k: int
                 ) -> tuple[int, int, int, tuple[int, ...]]:
    """The step's counters as vLLM's scheduler counts them (``make_spec_decoding_stats``): a draft
    wherever draft slots were scheduled, its draft tokens less the -1 pads of grammar-invalid
    drafts (what is left is ``k_valid``), its accepted tokens, and per position the drafts accepted
    past it."""
    drafted = k_sched > 0
    accepted = accepted[drafted]
    per_pos = np.bincount(accepted, minlength=k + 1)[::-1].cumsum()[::-1][1:] if len(accepted) else np.zeros(k)
    return int(drafted.sum()), int(k_valid[drafted].sum()), int(accepted.sum()), tuple(int(n) for n in per_pos[:k])


def run_load(
    spec: LoadSpec, sink: Sink, progress: Callable[[int], None] | None = None, realtime: bool = False
) -> dict[str, EngineTruth]:
    """Write ``spec.rows`` (or a few more, to the end of a step) request-steps to ``sink``,
    engines interleaved step by step; returns the ground truth by engine id. ``realtime``
    sends each step when its event time comes (one step per engine every ``step_ms``, the way
    a live engine publishes) instead of as fast as the sink takes them."""
    engines = [EngineSimulator(spec, i) for i in range(spec.engines)]
    rows = 0
    started = time.monotonic()
    for index, batch in enumerate(_batches(engines, spec, 1 if realtime else SEND_BATCH_STEPS)):
        if realtime:
            time.sleep(max(0.0, started + index * spec.step_ms / 1000 - time.monotonic()))
        for engine_key, messages in batch.items():
            sink.send(engine_key.encode(), messages)
        if realtime:
            sink.flush()
        rows = sum(e.truth.rows for e in engines)
        if progress:
            progress(rows)
    sink.flush()
    return {e.engine_id: e.truth for e in engines}


def _batches(engines: list[EngineSimulator], spec: LoadSpec, steps: int) -> Iterator[dict[str, list[bytes]]]:
    rows = 0
    while rows < spec.rows:
        batch: dict[str, list[bytes]] = {e.engine_id: [] for e in engines}
        for _ in range(steps):
            for engine in engines:
                batch[engine.engine_id].append(engine.step())
                rows += len(engine._ids)
                if rows >= spec.rows:
                    break
            if rows >= spec.rows:
                break
        yield batch
