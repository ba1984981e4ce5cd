"""Tiny targets whose next token is a fixed permutation of the current one, and exact EAGLE,
EAGLE-3 and MTP drafters for them: every draft such a drafter makes is accepted, so the truth of
a run is known without counting by hand (random weights give acceptance near 0, where a
placeholder and a real draft look alike).

The construction, in hidden size 64:
- every ordinary token (ids 3..999, a cycle of 997) embeds as a constant coordinate and 31
  rotations by multiples of its cycle index: e(t)[0] = 1, e(t)[2j+1:2j+3] = (cos, sin)(2π k_j n(t)/997);
- ``lm_head`` row σ(t) is e(t) without the constant, σ(t) = the token after t in the cycle, so
  argmax(lm_head · e(t)) = σ(t) with a wide margin (the k_j are chosen so that the other rows
  score at most about a third of the match);
- the target's layers write nothing to the residual stream (``o_proj`` and ``down_proj`` are
  zero), so its last hidden state is e(t) and it generates t, σ(t), σ²(t), ...;
- each drafter routes its input token's embedding to the same head and ignores the hidden
  states it is given: EAGLE through ``fc``, MTP through ``input_proj``, EAGLE-3 (which sees the
  token only through attention) through an attention head whose RoPE scores make each position
  attend to itself alone.
None of the directory names holds ``eagle-`` or ``eagle3``: vLLM rewrites the method from those.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specmetrics.tiny_models import VOCAB_SIZE, default_cache, save_atomically, save_tokenizer

if TYPE_CHECKING:
    import torch

HIDDEN = 64
HEADS = 2
HEAD_DIM = 32
INTERMEDIATE = 128
SPECIALS = 3
CYCLE = VOCAB_SIZE - SPECIALS
EAGLE3_AUX_LAYERS = [0, 1, 2]  # embeddings, after layer 0, after layer 1 (the target has 2 layers)
SELF_ATTENTION_MARGIN = 60.0  # logits between a position's score for itself and for any other


def next_token(token: int) -> int:
    """σ: the cycle targets' next token after ``token`` (ids below 3 are special, never generated)."""
    return SPECIALS + (token - SPECIALS + 1) % CYCLE


def _embedding() -> torch.Tensor:
    import torch

    generator = torch.Generator().manual_seed(0)
    steps = torch.randperm(CYCLE // 2 - 1, generator=generator)[: (HIDDEN - 2) // 2] + 1
    index = torch.cat([torch.tensor([0.25, 1.25, 2.25]), torch.arange(CYCLE, dtype=torch.float64)])
    angles = 2 * math.pi * index[:, None] * steps[None, :].double() / CYCLE
    out = torch.zeros(VOCAB_SIZE, HIDDEN, dtype=torch.float64)
    out[:, 0] = 1.0
    out[:, 1:-1:2], out[:, 2:-1:2] = torch.cos(angles), torch.sin(angles)
    return out.float()


def _lm_head(embedding: torch.Tensor) -> torch.Tensor:
    import torch

    head = torch.zeros_like(embedding)
    ordinary = torch.arange(SPECIALS, VOCAB_SIZE)
    head[[next_token(int(t)) for t in ordinary]] = embedding[ordinary]
    head[:, 0] = 0.0
    return head


def _llama_config(layers: int, **extra: Any) -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=VOCAB_SIZE, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE,
                       num_hidden_layers=layers, num_attention_heads=HEADS, num_key_value_heads=HEADS,
                       head_dim=HEAD_DIM, max_position_embeddings=4096, bos_token_id=1, eos_token_id=2,
                       tie_word_embeddings=False, **extra)


def _silence_layers(state: dict[str, torch.Tensor]) -> None:
    """Zero what the decoder layers add to the residual stream."""
    for name, tensor in state.items():
        if name.endswith(("o_proj.weight", "down_proj.weight", "o_proj.bias", "down_proj.bias")):
            tensor.zero_()


def _save_target(tmp: Path, mimo: bool) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    save_tokenizer(tmp)
    torch.manual_seed(0)
    if mimo:
        config = Qwen2Config(vocab_size=VOCAB_SIZE, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE,
                             num_hidden_layers=2, num_attention_heads=HEADS, num_key_value_heads=HEADS,
                             max_position_embeddings=4096, bos_token_id=1, eos_token_id=2,
                             tie_word_embeddings=False)
        config.num_nextn_predict_layers = 1
        config.architectures = ["MiMoForCausalLM"]
        model: Any = Qwen2ForCausalLM(config)
    else:
        config = _llama_config(2)
        config.architectures = ["LlamaForCausalLM"]
        model = LlamaForCausalLM(config)
    state = {name: tensor.detach().clone().contiguous() for name, tensor in model.state_dict().items()}
    embedding = _embedding()
    state["model.embed_tokens.weight"], state["lm_head.weight"] = embedding, _lm_head(embedding)
    if mimo:
        state.update(_mtp_layer(model.model.layers[0].state_dict()))
    _silence_layers(state)
    config.save_pretrained(tmp)
    save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})


def _mtp_layer(decoder_layer: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """MiMo's MTP layer: ``input_proj`` keeps the (normed) token embedding, drops the hidden state."""
    import torch

    prefix = "model.mtp_layers.0."
    state = {prefix + name: tensor.detach().clone() for name, tensor in decoder_layer.items()}
    for norm in ("token_layernorm", "hidden_layernorm", "final_layernorm"):
        state[f"{prefix}{norm}.weight"] = torch.ones(HIDDEN)
    state[prefix + "input_proj.weight"] = torch.cat([torch.zeros(HIDDEN, HIDDEN), torch.eye(HIDDEN)], dim=1)
    return state


def _save_eagle(tmp: Path) -> None:
    """EAGLE-1: ``fc`` [H, 2H] passes the token embedding through and drops the hidden state; the
    target's ``lm_head`` (shared, the checkpoint has none) maps it to σ(token)."""
    import torch
    from safetensors.torch import save_file
    from transformers import LlamaForCausalLM

    torch.manual_seed(1)
    config = _llama_config(1)
    config.architectures = ["LlamaForCausalLM"]
    layer = LlamaForCausalLM(config).model.layers[0].state_dict()
    state = {f"layers.0.{name}": tensor.detach().clone() for name, tensor in layer.items()
             if not name.startswith("input_layernorm")}  # EAGLE-1's first layer has no input norm
    state["fc.weight"] = torch.cat([torch.eye(HIDDEN), torch.zeros(HIDDEN, HIDDEN)], dim=1)
    _silence_layers(state)
    config.save_pretrained(tmp)
    save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})


def _self_attention(scale: float) -> torch.Tensor:
    """q (= k) rows reading the constant coordinate of the normed embedding: one (a, 0) per RoPE
    pair, so the score of positions d apart is a²/√head_dim · Σ_p cos(d·ω_p), largest at d = 0."""
    import torch

    weight = torch.zeros(HIDDEN, 2 * HIDDEN)
    for head in range(HEADS):
        weight[head * HEAD_DIM: head * HEAD_DIM + HEAD_DIM // 2, 0] = scale
    return weight


def _self_attention_scale(rope_theta: float, positions: int) -> float:
    """The smallest q/k amplitude giving every other position ``SELF_ATTENTION_MARGIN`` less."""
    import torch

    pairs = HEAD_DIM // 2
    omega = rope_theta ** (-torch.arange(pairs, dtype=torch.float64) / pairs)
    distance = torch.arange(1, positions + 1, dtype=torch.float64)[:, None]
    gap = float((1 - torch.cos(distance * omega)).sum(dim=1).min())
    amplitude = math.sqrt(SELF_ATTENTION_MARGIN * math.sqrt(HEAD_DIM) / gap)
    return amplitude / math.sqrt(HIDDEN / (1 + (HIDDEN - 2) // 2))  # the normed constant coordinate


def _save_eagle3(tmp: Path) -> None:
    """EAGLE-3: the token embedding reaches the layer only as half of attention's input, so one head
    attends to its own position (RoPE scores, ``_self_attention``) and copies the normed embedding;
    ``hidden_norm`` is zero, so the fused auxiliary hidden states (``fc`` [H, 3H]) add nothing. The
    draft vocabulary is the 997 ordinary tokens (``d2t``), its head the target's rows for them."""
    import torch
    from safetensors.torch import save_file
    from transformers import LlamaForCausalLM

    rope_theta = 10000.0
    torch.manual_seed(2)
    config = _llama_config(1, draft_vocab_size=CYCLE, norm_before_residual=True, target_hidden_size=HIDDEN,
                           eagle_config={"eagle_aux_hidden_state_layer_ids": EAGLE3_AUX_LAYERS,
                                         "use_aux_hidden_state": True})
    config.architectures = ["LlamaForCausalLMEagle3"]
    layer = LlamaForCausalLM(_llama_config(1)).model.layers[0].state_dict()
    state = {f"midlayer.{name}": tensor.detach().clone() for name, tensor in layer.items()
             if not name.startswith("self_attn.")}
    qk = _self_attention(_self_attention_scale(rope_theta, 4096))
    identity = torch.cat([torch.eye(HIDDEN), torch.zeros(HIDDEN, HIDDEN)], dim=1)
    state.update({"midlayer.self_attn.q_proj.weight": qk, "midlayer.self_attn.k_proj.weight": qk.clone(),
                  "midlayer.self_attn.v_proj.weight": identity, "midlayer.self_attn.o_proj.weight": torch.eye(HIDDEN),
                  "midlayer.hidden_norm.weight": torch.zeros(HIDDEN), "norm.weight": torch.ones(HIDDEN),
                  "fc.weight": torch.randn(HIDDEN, HIDDEN * len(EAGLE3_AUX_LAYERS)) * 0.02,
                  "lm_head.weight": _lm_head(_embedding())[SPECIALS:].contiguous(),
                  "d2t": torch.full((CYCLE,), SPECIALS, dtype=torch.long)})
    state["midlayer.mlp.down_proj.weight"].zero_()
    config.save_pretrained(tmp)
    save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})


def cycle_models(cache: Path | None = None) -> dict[str, Path]:
    """``cycle_target`` (Llama), ``eagle`` and ``eagle3`` drafters for it, and ``mimo`` (a target with its
    own MTP layer), built on first use."""
    root = cache or default_cache()
    return {
        "cycle_target": save_atomically(root / "tiny-cycle-llama", lambda tmp: _save_target(tmp, mimo=False)),
        "eagle": save_atomically(root / "tiny-cycle-hidden-drafter", _save_eagle),
        "eagle3": save_atomically(root / "tiny-cycle-fused-drafter", _save_eagle3),
        "mimo": save_atomically(root / "tiny-cycle-mimo", lambda tmp: _save_target(tmp, mimo=True)),
    }
