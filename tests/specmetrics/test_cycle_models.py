"""The cycle construction in plain torch: what makes the EAGLE, EAGLE-3 and MTP drafters exact.

The end-to-end proof is vLLM itself (tests/emitter/vllm); these checks fail fast, and say which
part broke, when the construction changes."""

from __future__ import annotations

import math

import torch

from specmetrics import cycle_models
from specmetrics.cycle_models import CYCLE, SPECIALS, next_token


def normed(x: torch.Tensor) -> torch.Tensor:
    return x / x.pow(2).mean(dim=-1, keepdim=True).add(1e-6).sqrt()


def test_next_token_is_a_cycle_through_every_ordinary_token() -> None:
    token, seen = SPECIALS, set()
    for _ in range(CYCLE):
        seen.add(token)
        token = next_token(token)
    assert token == SPECIALS and seen == set(range(SPECIALS, SPECIALS + CYCLE))


def test_the_head_maps_each_embedding_to_its_successor_by_a_wide_margin() -> None:
    embedding = cycle_models._embedding()
    scores = normed(embedding) @ cycle_models._lm_head(embedding).T
    top = scores[SPECIALS:].topk(2, dim=-1)
    assert top.indices[:, 0].tolist() == [next_token(t) for t in range(SPECIALS, SPECIALS + CYCLE)]
    assert float((top.values[:, 0] - top.values[:, 1]).min()) > 20  # logits; float32 noise is ~1e-5


def test_the_eagle3_head_attends_to_its_own_position_only() -> None:
    rope_theta, positions, pairs = 10000.0, 4096, cycle_models.HEAD_DIM // 2
    weight = cycle_models._self_attention(cycle_models._self_attention_scale(rope_theta, positions))
    x = torch.cat([normed(cycle_models._embedding()[SPECIALS:SPECIALS + 1]), torch.zeros(1, 64)], dim=1)
    q = (weight.double() @ x[0].double())[:cycle_models.HEAD_DIM]
    assert torch.allclose(q[pairs:], torch.zeros(pairs, dtype=torch.float64))
    omega = rope_theta ** (-torch.arange(pairs, dtype=torch.float64) / pairs)
    distance = torch.arange(positions + 1, dtype=torch.float64)[:, None]
    scores = (q[:pairs] ** 2 * torch.cos(distance * omega)).sum(dim=1) / math.sqrt(cycle_models.HEAD_DIM)
    assert float(scores[0] - scores[1:].max()) >= cycle_models.SELF_ATTENTION_MARGIN - 0.01  # float32 weights
