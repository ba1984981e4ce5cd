"""The context cap on vLLM's real config and scheduler: under Model Runner V2 (0.33 with V2, always in
0.34) vLLM lowers the target's max model length to the drafter's; the plugin's config hook notes the
length before, and every step event carries both (tests/emitter/vllm/test_releases.py runs this on
each release). The same events say whether a skip for length could be seen: a V1 runner's decision
arrived (observed) or did not (unobserved); V2 never skips (none)."""

from __future__ import annotations

from pathlib import Path

import pytest
import vllm
from vllm.config import VllmConfig
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.outputs import DraftTokenIds

from specmetrics.emitter.vllm import config as config_hooks
from specmetrics.emitter.vllm.worker import DECISION_ATTR
from specmetrics.queries import connect, run_query
from tests.support.schedulers import DRAFTER_MAX_LEN, K, build, hook_plugin, request, runner_output, views

#: Where vLLM lowers the context: the releases run on Model Runner V2 here (0.33 picks it with
#: CUDA_VISIBLE_DEVICES empty, as tests/support/vllm_releases.py sets; 0.34 has no other).
CAPPED = {"0.33.0", "0.34.0"}


def test_events_carry_the_served_context_the_length_vllm_lowered_and_whether_skips_were_seen(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if "_limit_max_model_len_to_draft" in VllmConfig.__dict__:  # unwrapped again after the test
        monkeypatch.setattr(VllmConfig, "_limit_max_model_len_to_draft",
                            VllmConfig.__dict__["_limit_max_model_len_to_draft"])
    assert config_hooks.install() == []
    log = hook_plugin(tmp_path, monkeypatch)
    sched = build(Scheduler, model_cache / "tiny-llama-target", model_cache / "tiny-llama-same-drafter")
    capped = vllm.__version__ in CAPPED
    assert sched.max_model_len == (DRAFTER_MAX_LEN if capped else 256)
    sched.add_request(request("r0"))
    for step in range(5):
        scheduler_output = sched.schedule()
        ids, drafts = list(scheduler_output.num_scheduled_tokens), scheduler_output.scheduled_spec_decode_tokens
        model_runner_output = runner_output({r: [5] * (1 + len(drafts.get(r, ()))) for r in ids})
        if step < 2:  # then the worker's decisions stop arriving (its hook failed, say)
            setattr(model_runner_output, DECISION_ATTR, (True, 20, DRAFTER_MAX_LEN))
        sched.update_from_output(scheduler_output, model_runner_output)
        sched.update_draft_token_ids(DraftTokenIds(ids, [[5] * K for _ in ids]))
    _, rows = views(tmp_path, log)
    assert [row[2] for row in rows] == ["drafted"] * 4
    con = connect(tmp_path / "data")
    seen = run_query(con, "SELECT step_index, max_model_len, context_cap_from, skip_check FROM request_steps "
                          "ORDER BY step_index").to_pylist()
    caps = run_query(con, "SELECT summary FROM context_caps").to_pylist()
    skips = run_query(con, "SELECT skips, skip_share FROM skip_checks").to_pylist()
    con.close()
    if capped:
        assert [(r["max_model_len"], r["context_cap_from"], r["skip_check"]) for r in seen] == [(96, 256, "none")] * 4
        assert caps == [{"summary": "context capped from 256 to 96 by the drafter"}]
        assert skips == [{"skips": "impossible", "skip_share": 0.0}]
    else:  # V1: the decision made after steps 1 and 2 describes the drafts verified at steps 2 and 3
        assert [(r["max_model_len"], r["context_cap_from"], r["skip_check"]) for r in seen] == [
            (256, None, "observed"), (256, None, "observed"), (256, None, "unobserved"), (256, None, "unobserved")]
        assert caps == [{"summary": "context 256, not capped"}]
        assert skips == [{"skips": "unknown", "skip_share": None}]
