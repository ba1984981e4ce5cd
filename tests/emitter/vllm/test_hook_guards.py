"""Each scheduler hook has a guard of its own: one that fails is logged and stops, the rest go on.

Production path: the plugin's wrappers on vLLM's real ``Scheduler`` (built on CPU), driven step by
step with constructed model-runner outputs.
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import Any

import pytest
import vllm
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.outputs import DraftTokenIds

from specmetrics.emitter import plugin
from specmetrics.emitter.vllm import scheduler as scheduler_hooks
from specmetrics.emitter.vllm.patching import Guard
from specmetrics.queries import connect, run_query
from tests.support.ingest import ingest_once
from tests.support.schedulers import K, add_counters, build, hook_plugin, request, runner_output, views


def test_a_failing_start_hook_stops_alone_and_the_outcomes_are_still_recorded(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    log = hook_plugin(tmp_path, monkeypatch)
    real_init = scheduler_hooks.EngineObserver.__init__
    calls: list[int] = []

    def init_failing_once(self: Any, *args: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("labels unreadable")
        real_init(self, *args)

    monkeypatch.setattr(scheduler_hooks.EngineObserver, "__init__", init_failing_once)
    with caplog.at_level(logging.ERROR, logger="vllm.specmetrics"):
        sched = build(Scheduler, model_cache / "tiny-llama-target")
    assert [r.getMessage().split(" failed")[0] for r in caplog.records] == [
        "specmetrics: observing the engine's start (Scheduler.__init__)"]
    sched.add_request(request("r0"))
    totals: dict[str, int] = {}
    for _ in range(4):
        scheduler_output = sched.schedule()
        ids, drafts = list(scheduler_output.num_scheduled_tokens), scheduler_output.scheduled_spec_decode_tokens
        model_runner_output = runner_output({r: [5] * (1 + len(drafts.get(r, ()))) for r in ids})
        add_counters(totals, sched.update_from_output(scheduler_output, model_runner_output))
        sched.update_draft_token_ids(DraftTokenIds(ids, [[5] * K for _ in ids]))
    vllm_view, rows = views(tmp_path, log)
    assert vllm_view == [totals] == [{"num_drafts": 3, "num_draft_tokens": 9, "num_accepted_tokens": 9}]
    assert [row[:3] for row in rows] == [(2, "r0", "drafted"), (3, "r0", "drafted"), (4, "r0", "drafted")]


@pytest.fixture
def update_guards_reset() -> Any:
    """The guards of the installed ``update_from_output`` wrapper (one per process), enabled again after
    the test: a guard that stopped stays stopped for the life of the process."""
    yield
    wrapper = Scheduler.__dict__["update_from_output"]
    for cell in wrapper.__closure__ or ():
        if isinstance(cell.cell_contents, Guard):
            cell.cell_contents.enabled = True


def test_a_hook_that_stops_itself_still_sends_vllms_own_counters_of_every_later_step(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    update_guards_reset: Any,
) -> None:
    """Observing the outcomes raises at the third step (a release changed what the hook reads): that
    step and every later one go out as vLLM-only steps with vLLM's own counters, so the stored steps
    hold all of vLLM's counts: the observed ones as outcomes, the rest as vLLM's numbers."""
    log = hook_plugin(tmp_path, monkeypatch)
    real_after = scheduler_hooks.EngineObserver.after
    calls: list[int] = []

    def after_failing_at_the_third(self: Any, *args: Any) -> None:
        calls.append(1)
        if len(calls) == 3:
            raise AttributeError("'ModelRunnerOutput' object has no attribute 'sampled_token_ids'")
        real_after(self, *args)

    monkeypatch.setattr(scheduler_hooks.EngineObserver, "after", after_failing_at_the_third)
    sched = build(Scheduler, model_cache / "tiny-llama-target")
    sched.add_request(request("r0"))
    sched.add_request(request("r1"))
    totals: dict[str, int] = {}
    with caplog.at_level(logging.ERROR, logger="vllm.specmetrics"):
        for _ in range(7):
            scheduler_output = sched.schedule()
            ids, drafts = list(scheduler_output.num_scheduled_tokens), scheduler_output.scheduled_spec_decode_tokens
            model_runner_output = runner_output({r: [5] * (1 + min(1, len(drafts.get(r, ())))) for r in ids})
            add_counters(totals, sched.update_from_output(scheduler_output, model_runner_output))
            sched.update_draft_token_ids(DraftTokenIds(ids, [[5] * K for _ in ids]))
    assert [r.getMessage().split(" failed")[0] for r in caplog.records if r.name == "vllm.specmetrics"] == [
        "specmetrics: observing speculative decoding outcomes (Scheduler.update_from_output)"]
    plugin.flush()
    ingest_once(log, tmp_path / "data")
    con = connect(tmp_path / "data")
    try:
        observed = run_query(con, "SELECT num_drafts, num_draft_tokens, num_accepted_tokens FROM acceptance_vllm"
                             ).to_pylist()
        [only] = run_query(con, "FROM vllm_only_steps").to_pylist()
        steps = run_query(con, "SELECT count(DISTINCT event_id) AS n FROM request_steps").to_pylist()
    finally:
        con.close()
    assert steps == [{"n": 1}]  # the second step: the first verified no draft, the third failed
    assert only["vllm_only"] == "step_hook_disabled" and only["steps"] == 5
    assert {name: observed[0][name] + only[name] for name in totals} == totals
    assert totals["num_drafts"] == 12 and only["num_drafts"] == 10


def test_worker_hooks_that_cannot_install_leave_the_scheduler_hooks_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from specmetrics.emitter import plugin
    from specmetrics.emitter.settings import EmitterSettings
    from specmetrics.emitter.vllm import worker
    from specmetrics.emitter.vllm.patching import MARKER

    def broken() -> list[str]:
        raise ImportError("no gpu_model_runner on this platform")

    monkeypatch.setenv("SPECMETRICS_SINK", (tmp_path / "log").as_uri())
    monkeypatch.setattr(plugin, "_state", plugin._PluginState(settings=EmitterSettings()))
    monkeypatch.setattr(worker, "install", broken)
    update = Scheduler.__dict__["update_from_output"]  # unwrapped for this test (another may have wrapped it)
    monkeypatch.setattr(Scheduler, "update_from_output", getattr(update, "__wrapped__", update))
    with caplog.at_level(logging.WARNING, logger="vllm.specmetrics"):
        plugin.register()
    assert getattr(Scheduler.__dict__["update_from_output"], MARKER, False)
    messages = [r.getMessage() for r in caplog.records]
    assert "specmetrics: could not install specmetrics.emitter.vllm.worker; vLLM runs without it" in messages
    assert messages[-1] == f"specmetrics: vLLM {vllm.__version__}: recording step events without: skipped_for_length"


def test_an_engine_is_counted_once_it_observes_and_let_go_of_once(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The observer attaches to the publisher last, so an observer that fails to start leaves no
    count behind (the engine's shutdown would otherwise never flush)."""
    from specmetrics.emitter import plugin
    from specmetrics.emitter.settings import EmitterSettings

    monkeypatch.setattr(plugin, "_state", plugin._PluginState(settings=EmitterSettings(sink=(tmp_path / "l").as_uri())))
    sched = build(Scheduler, model_cache / "tiny-llama-target")
    with monkeypatch.context() as patch:
        patch.setattr(scheduler_hooks, "vllm_version", lambda: 1 // 0)  # the observer's start fails
        with pytest.raises(ZeroDivisionError):
            scheduler_hooks.EngineObserver(sched, EmitterSettings(), plugin.attach)
    assert plugin._state.engines == 0
    observer = scheduler_hooks.EngineObserver(sched, EmitterSettings(), plugin.attach)
    assert plugin._state.engines == 1 and observer.publisher is plugin._state.publisher
    plugin.detach()
    assert plugin._state.engines == 0 and plugin._state.publisher is None


#: The hooks each release cannot install (its code is gone), by the name the plugin gives them.
CANNOT_INSTALL: dict[str, dict[str, str]] = {}
#: The releases with Model Runner V2 only: no worker hook needed for skipped_for_length.
V2_ONLY = {"0.34.0"}
TARGETS = {  # every method the plugin wraps where the release has it, restored after the test
    "vllm.config.VllmConfig": ("_limit_max_model_len_to_draft",),
    "vllm.v1.core.sched.scheduler.Scheduler": ("__init__", "schedule", "update_from_output", "update_draft_token_ids"),
    "vllm.v1.engine.core.EngineCore": ("shutdown",),
    "vllm.v1.worker.gpu_model_runner.GPUModelRunner": ("_input_fits_in_drafter", "sample_tokens"),
    "vllm.v1.worker.gpu.model_runner.GPUModelRunner": ("sample_tokens",),
    "vllm.v1.worker.gpu.spec_decode.adaptive_verification.AdaptiveVerificationManager": ("reallocate_drafts",),
}


def test_every_hook_the_running_vllm_has_installs_and_the_start_up_line_names_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """On each release, every hook whose target exists installs; one that cannot says so by name,
    once, and the start-up line names the release and what is not observed."""
    from specmetrics.emitter import plugin
    from specmetrics.emitter.settings import EmitterSettings
    from specmetrics.emitter.vllm.patching import MARKER

    for path, names in TARGETS.items():
        module, _, cls = path.rpartition(".")
        try:
            owner = getattr(importlib.import_module(module), cls)
        except ImportError:
            continue
        for name in names:
            if name in owner.__dict__:
                monkeypatch.setattr(owner, name, owner.__dict__[name])
    monkeypatch.setenv("SPECMETRICS_SINK", (tmp_path / "log").as_uri())
    monkeypatch.setattr(plugin, "_state", plugin._PluginState(settings=EmitterSettings()))
    with caplog.at_level(logging.INFO, logger="vllm.specmetrics"):
        plugin.register()
    messages = [r.getMessage() for r in caplog.records]
    missing = CANNOT_INSTALL.get(vllm.__version__, {})
    if missing:
        assert messages[-1] == (f"specmetrics: vLLM {vllm.__version__}: recording step events without: "
                                f"{', '.join(missing)}")
    else:
        assert messages[-1] == f"specmetrics: vLLM {vllm.__version__}: recording step events, every hook installed"
    for target in missing.values():
        module, _, name = target.rpartition(".")
        assert sum(f"has no {module}.{name} " in m for m in messages) == 1, messages
    assert not any("could not install" in m for m in messages), messages
    not_needed = [m for m in messages if "runs Model Runner V2 only, which never skips drafting for length" in m]
    assert len(not_needed) == (vllm.__version__ in V2_ONLY)
    assert len(messages) == 1 + len(missing) + len(not_needed)
    assert getattr(Scheduler.__dict__["update_from_output"], MARKER, False)
