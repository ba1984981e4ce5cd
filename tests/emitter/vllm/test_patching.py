"""Wrapping safely: a changed vLLM is reported, a failing observation disables itself."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from specmetrics.emitter.vllm.patching import MARKER, Guard, wrap


class Engine:
    def step(self, batch: list[int]) -> int:
        return len(batch)


def observing(guard: Guard, seen: list[int]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def step(self: Any, batch: list[int]) -> int:
            result: int = original(self, batch)
            if guard.enabled:
                try:
                    seen.append(10 // batch[0])  # fails on a batch starting with 0
                except Exception as exc:
                    guard.failed(exc)
            return result

        return step

    return make


def test_a_failing_observation_is_logged_once_and_disabled_and_the_method_still_works(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Local(Engine):
        step = Engine.step

    guard, seen = Guard("steps"), []
    assert wrap(Local, "step", ("self", "batch"), "steps", observing(guard, seen))
    with caplog.at_level(logging.ERROR, logger="vllm.specmetrics"):
        assert [Local().step(b) for b in ([5], [0], [2], [0])] == [1, 1, 1, 1]
    assert seen == [2]  # observed until the failure, then off
    assert guard.enabled is False
    errors = [r for r in caplog.records if "observing steps failed" in r.getMessage()]
    assert len(errors) == 1 and "vLLM keeps serving" in errors[0].getMessage()


def test_a_missing_method_or_a_changed_signature_is_not_wrapped_and_says_what_is_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Changed:
        def step(self, requests: list[int], budget: int) -> int:
            return budget

    with caplog.at_level(logging.WARNING, logger="vllm.specmetrics"):
        assert not wrap(Changed, "step", ("self", "batch"), "skipped_for_length events", lambda o: o)
        assert not wrap(Changed, "gone", ("self",), "the step index", lambda o: o)
    messages = [r.getMessage() for r in caplog.records]
    assert any("Changed.step(self, requests" in m and "does not match the expected (self, batch)" in m
               and "cannot observe skipped_for_length events" in m for m in messages)
    assert any("Changed.gone not found" in m and "cannot observe the step index" in m for m in messages)
    assert Changed().step([1], 7) == 7


def test_wrapping_twice_keeps_one_wrapper() -> None:
    class Local(Engine):
        step = Engine.step

    calls: list[int] = []

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def step(self: Any, batch: list[int]) -> int:
            calls.append(1)
            result: int = original(self, batch)
            return result

        return step

    assert wrap(Local, "step", ("self", "batch"), "x", make)
    assert wrap(Local, "step", ("self", "batch"), "x", make)
    assert getattr(Local.__dict__["step"], MARKER)
    Local().step([1])
    assert calls == [1]
