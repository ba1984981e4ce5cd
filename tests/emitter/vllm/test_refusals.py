"""Requests refused for length, counted on the real checks of the running vLLM (each release
of tests/emitter/vllm/test_releases.py): the renderer's on prompt tokens and text, the input
processor's; vLLM's own error reaches the caller unchanged."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from prometheus_client import REGISTRY
from vllm.exceptions import VLLMValidationError
from vllm.renderers.params import TokenizeParams
from vllm.v1.engine.input_processor import InputProcessor

from specmetrics.emitter.vllm import refusals


def refused(check: str) -> float:
    return REGISTRY.get_sample_value(f"{refusals.COUNTER}_total", {"check": check}) or 0.0


def test_each_length_check_counts_its_refusals_and_vllm_still_refuses() -> None:
    assert refusals.install() == []
    before = {check: refused(check) for check in refusals.CHECKS}
    params = TokenizeParams(max_total_tokens=8)
    assert params._token_len_check(None, list(range(8))) == list(range(8))  # fits: not counted
    with pytest.raises(VLLMValidationError, match="maximum context length is 8"):
        params._token_len_check(None, list(range(9)))

    class Tokenizer:
        max_chars_per_token = 2

    with pytest.raises(VLLMValidationError, match="maximum context length"):
        params._text_len_check(Tokenizer(), "x" * 17)  # more characters than 8 tokens can hold
    processor = SimpleNamespace(skip_prompt_length_check=False, supports_mm_inputs=False, mm_encoder_cache_size=0,
                                model_config=SimpleNamespace(max_model_len=8, runner_type="generate"))
    with pytest.raises(VLLMValidationError, match="longer than the maximum model length of 8"):
        InputProcessor._validate_prompt_len(processor, 9, "decoder")
    with pytest.raises(VLLMValidationError, match="cannot be empty"):
        InputProcessor._validate_prompt_len(processor, 0, "decoder")  # refused, but not for length
    assert {check: refused(check) - before[check] for check in refusals.CHECKS} == {
        "prompt_tokens": 1, "prompt_text": 1, "model_input": 1}
    assert refusals.install() == []  # installed once: nothing counts twice
    with pytest.raises(VLLMValidationError):
        params._token_len_check(None, list(range(9)))
    assert refused("prompt_tokens") - before["prompt_tokens"] == 2
