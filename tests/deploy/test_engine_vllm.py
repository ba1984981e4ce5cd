"""``docker compose --profile cpu up`` on a real Docker engine: vLLM in the image the compose file
builds (docker/vllm.Dockerfile: vLLM's CPU release, or its stand-in, with the plugin), serving the
tiny local models with a same-weights drafter; requests through the OpenAI API; the plugin's step
events reach ingest through Kafka, and the views equal vLLM's own /metrics counters."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from devtools.ports import free_port
from specmetrics.tiny_models import tiny_models
from tests.support.docker_engine import COMPOSE_FILE, Stack, compose_project, prepare_images, prepare_vllm_cpu
from tests.support.http import get
from tests.support.metrics import scrape, wait_for

PROJECT = "specmetrics-vllmtest"
SERVICES = ("kafka", "kafka-init", "ingest", "vllm-cpu")
K = 3
COUNTERS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens")
ENGINE = "vllm-cpu-test/dp0"  # SPECMETRICS_ENGINE_LABEL, data-parallel rank 0


@pytest.fixture(scope="module")
def stack(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("vllm-engine")
    models = tiny_models(root / "models")
    files = [*prepare_images(), prepare_vllm_cpu()]
    assert files[0] == COMPOSE_FILE
    env = {"STEPS_TOPIC": "vllmtest.steps", "SPECMETRICS_INGEST_FLUSH_IDLE_S": 1, "KAFKA_HOST_PORT": free_port(),
           "VLLM_PORT": free_port(), "VLLM_CPU_KVCACHE_SPACE": 1, "SPECMETRICS_TEST_MODELS": root / "models",
           "MODEL": f"/models/{models['target'].name}", "SPEC_METHOD": "draft_model",
           "SPEC_DRAFT_MODEL": f"/models/{models['same_drafter'].name}", "SPEC_NUM_TOKENS": K, "MAX_MODEL_LEN": 512,
           "SPECMETRICS_ENGINE_LABEL": "vllm-cpu-test", "SPECMETRICS_FLUSH_INTERVAL_MS": 200}
    with compose_project(PROJECT, files, root / "stack.env", ("cpu",), env, SERVICES) as up:
        port = int(up.env["VLLM_PORT"])

        def serving() -> bool:
            if get(port, "/health") is not None:
                return True
            if up.state("vllm-cpu")["State"] != "running":  # restart: unless-stopped restarts it
                raise AssertionError(f"vLLM did not come up:\n{up('logs', '--tail', '60', 'vllm-cpu', check=False)}")
            return False

        wait_for(serving, 600, "vLLM's /health", 2)
        yield up


def complete(port: int, model: str, prompt: str) -> dict[str, object]:
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": 24, "temperature": 0,
                       "ignore_eos": True}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        answer: dict[str, object] = json.loads(response.read())
        return answer


def vllm_counters(port: int) -> dict[str, int]:
    """vLLM's own spec-decode counters from its /metrics, summed over label sets."""
    found = dict.fromkeys(COUNTERS, 0)
    for (name, _), value in scrape(port).items():
        counter = name.removeprefix("vllm:spec_decode_").removesuffix("_total")
        if name.startswith("vllm:spec_decode_") and counter in found:
            found[counter] += int(value)
    return found


def test_vllm_in_its_container_sends_step_events_whose_views_equal_its_own_counters(stack: Stack) -> None:
    port = int(stack.env["VLLM_PORT"])
    model = json.loads(get(port, "/v1/models") or b"{}")["data"][0]["id"]
    for prompt in ("the quick brown fox", "speculative decoding in production", "a tiny model on a cpu"):
        assert complete(port, model, prompt)["choices"]
    counters = vllm_counters(port)
    assert counters["num_drafts"] > 0

    def views() -> tuple[dict[str, int], dict[str, object]]:
        query = "SELECT num_drafts, num_draft_tokens, num_accepted_tokens FROM {} WHERE engine_id = ?"
        vllm_rows = stack.sql(query.format("acceptance_vllm"), ENGINE)
        corrected = stack.sql(query.format("acceptance"), ENGINE)
        return ({k: int(v) for k, v in vllm_rows[0].items()} if vllm_rows else {}), (corrected[0] if corrected else {})

    deadline = time.monotonic() + 120
    while (got := views())[0] != counters:
        assert time.monotonic() < deadline, f"views {got} vs vLLM's counters {counters}"
        time.sleep(2)
    corrected = got[1]
    assert corrected["num_accepted_tokens"] == corrected["num_draft_tokens"] == K * int(str(corrected["num_drafts"]))
    assert stack.sql("SELECT DISTINCT method, vllm_version FROM request_steps") == [
        {"method": "draft_model", "vllm_version": "0.32.0"}]


def test_a_request_longer_than_the_served_context_is_refused_and_counted_on_vllms_metrics(stack: Stack) -> None:
    """vLLM refuses it (400) before any engine step; the plugin's front-end hook counts it on vLLM's
    own /metrics (MAX_MODEL_LEN 512)."""
    port = int(stack.env["VLLM_PORT"])
    model = json.loads(get(port, "/v1/models") or b"{}")["data"][0]["id"]

    def refused() -> float:
        return sum(value for (name, _), value in scrape(port).items()
                   if name == "specmetrics_requests_refused_for_length_total")

    before = refused()
    with pytest.raises(urllib.error.HTTPError) as answer:
        complete(port, model, "speculative " * 1000)
    assert answer.value.code == 400 and b"context length" in answer.value.read()
    assert refused() == before + 1
    assert complete(port, model, "a prompt that fits")["choices"]
    assert refused() == before + 1
