"""Wire encodings of one step batch (64 request-steps), encode + decode + to Arrow.

Prints one JSON line per encoding: rows/s to encode from plain values, rows/s to decode into
an Arrow table, and wire bytes per request-step. Baseline in the same run: pydantic JSON.

    python -m benchmarks.bench_wire [--steps 2000]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np
import pyarrow as pa

from benchmarks.args import positive_int
from specmetrics.emitter.loadgen import LoadSpec
from specmetrics.emitter.loadgen.simulator import EngineSimulator
from specmetrics.ingest.batch import PartitionBuffer
from specmetrics.schemas import StepEvent
from specmetrics.schemas.codes import OUTCOME_COLUMNS, OUTCOME_DTYPE
from specmetrics.schemas.wire import (
    OutcomeColumns,
    _outcome_dict,
    decode_step,
    encode_step,
    seq_len_column,
    step_event_from_wire,
)

Step = tuple[dict[str, Any], dict[str, list[Any]]]


def sample_steps(count: int) -> list[Step]:
    """Realistic steps as plain values: (envelope, columns incl. request_id)."""
    sim = EngineSimulator(LoadSpec(seed=3), 0)
    steps = []
    for _ in range(count):
        step = decode_step(sim.step())
        env = {"event_id": step.event_id, "engine_instance": step.context.engine_instance, "dp_rank": 0,
               "model": step.context.model, "vllm_version": step.context.vllm_version, "method": step.context.method,
               "num_spec_tokens": step.context.num_spec_tokens, "drafter_max_len": step.context.drafter_max_len,
               "step_index": step.step_index, "event_time_us": step.event_time_us,
               "batch_max_seq_len": step.batch_max_seq_len}
        packed = np.frombuffer(step.outcomes, dtype=OUTCOME_DTYPE)
        ends = np.frombuffer(step.request_id_offsets, dtype="<i4")
        cols: dict[str, list[Any]] = {name: packed[name].tolist() for name in OUTCOME_COLUMNS}
        cols["seq_len"] = seq_len_column([step]).tolist()
        cols["request_id"] = [step.request_id_data[ends[i]:ends[i + 1]].decode() for i in range(step.n)]
        steps.append((env, cols))
    return steps


def _rows(cols: dict[str, list[Any]]) -> list[dict[str, Any]]:
    names = list(cols)
    return [dict(zip(names, values, strict=True)) for values in zip(*cols.values(), strict=True)]


# --- pydantic JSON (the contract's own models, one per outcome) ---------------------------------
def pydantic_encode(step: Step) -> bytes:
    env, cols = step
    outcomes = [_outcome_dict(r.pop("request_id"), r) for r in _rows(cols)]
    fields = {k: v for k, v in env.items() if k != "event_time_us"}
    fields["event_time"] = env["event_time_us"] / 1e6
    return StepEvent.model_validate({**fields, "outcomes": outcomes}).model_dump_json().encode()


def pydantic_decode(payloads: list[bytes]) -> pa.Table:
    rows = []
    for payload in payloads:
        event = StepEvent.model_validate_json(payload)
        env = event.model_dump(exclude={"outcomes"})
        rows += [{**env, **o.model_dump()} for o in event.outcomes]
    return pa.Table.from_pylist(rows)


# --- msgpack, one dict per outcome --------------------------------------------------------------
def msgpack_rows_encode(step: Step) -> bytes:
    env, cols = step
    return msgpack.packb({**env, "outcomes": _rows(cols)})


def msgpack_rows_decode(payloads: list[bytes]) -> pa.Table:
    rows = []
    for payload in payloads:
        message = msgpack.unpackb(payload)
        outcomes = message.pop("outcomes")
        rows += [{**message, **o} for o in outcomes]
    return pa.Table.from_pylist(rows)


# --- msgpack, columns as lists -------------------------------------------------------------------
def msgpack_columns_encode(step: Step) -> bytes:
    env, cols = step
    return msgpack.packb({**env, "columns": cols})


def msgpack_columns_decode(payloads: list[bytes]) -> pa.Table:
    columns: dict[str, list[Any]] = {}
    for payload in payloads:
        message = msgpack.unpackb(payload)
        cols = message.pop("columns")
        n = len(cols["kind"])
        for key, values in cols.items():
            columns.setdefault(key, []).extend(values)
        for key, value in message.items():
            columns.setdefault(key, []).extend([value] * n)
    return pa.table(columns)


# --- Arrow IPC, one record batch per step --------------------------------------------------------
def arrow_ipc_encode(step: Step) -> bytes:
    env, cols = step
    batch = pa.record_batch({**{k: pa.array(v) for k, v in cols.items()}})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema.with_metadata({k: str(v) for k, v in env.items()})) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def arrow_ipc_decode(payloads: list[bytes]) -> pa.Table:
    batches, envelopes = [], []
    for payload in payloads:
        reader = pa.ipc.open_stream(payload)
        batches += list(reader)
        envelopes.append(reader.schema.metadata)
    table = pa.Table.from_batches([b.replace_schema_metadata() for b in batches])
    counts = np.array([b.num_rows for b in batches])
    for key in envelopes[0]:
        table = table.append_column(key.decode(), pa.array(np.repeat([e[key].decode() for e in envelopes], counts)))
    return table


# --- specmetrics: packed outcomes + id blob, validated, vectorised -------------------------------
def specmetrics_encode(step: Step) -> bytes:
    env, cols = step
    return encode_step(env, OutcomeColumns(**cols))  # type: ignore[arg-type]


def specmetrics_decode(payloads: list[bytes]) -> pa.Table:
    buffer = PartitionBuffer(0, 0)
    for offset, payload in enumerate(payloads):
        buffer.add(offset, payload, decode_step(payload))
    return buffer.build()[0]


ENCODINGS: dict[str, tuple[Callable[[Step], bytes], Callable[[list[bytes]], pa.Table]]] = {
    "pydantic_json": (pydantic_encode, pydantic_decode),
    "msgpack_rows": (msgpack_rows_encode, msgpack_rows_decode),
    "msgpack_columns": (msgpack_columns_encode, msgpack_columns_decode),
    "arrow_ipc": (arrow_ipc_encode, arrow_ipc_decode),
    "specmetrics_packed": (specmetrics_encode, specmetrics_decode),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=positive_int, default=2000)
    args = parser.parse_args(argv)
    steps = sample_steps(args.steps)
    rows = sum(len(cols["kind"]) for _, cols in steps)
    baseline = None
    for name, (encode, decode) in ENCODINGS.items():
        t0 = time.perf_counter()
        payloads = [encode(s) for s in steps]
        t1 = time.perf_counter()
        table = decode(payloads)
        t2 = time.perf_counter()
        assert table.num_rows == rows, (name, table.num_rows)
        roundtrip = rows / (t2 - t0)
        baseline = baseline or roundtrip
        print(json.dumps({
            "bench": "wire", "encoding": name, "rows": rows, "rows_per_step": rows // len(steps),
            "encode_rows_per_s": round(rows / (t1 - t0)), "decode_to_arrow_rows_per_s": round(rows / (t2 - t1)),
            "roundtrip_rows_per_s": round(roundtrip), "vs_pydantic_json": round(roundtrip / baseline, 2),
            "wire_bytes_per_row": round(sum(map(len, payloads)) / rows, 1),
        }))
    step_event_from_wire(specmetrics_encode(steps[0]))  # the chosen encoding round-trips the contract


if __name__ == "__main__":
    main()
