"""Tiny local Llama models for the demo and the tests: no hub, built on first use, cached.

A BPE tokenizer (vocabulary ~1000) trained on generated text, and random
``LlamaForCausalLM`` weights (hidden 64, 2 layers, head_dim 32: vLLM's CPU attention needs a
head size of at least 32). A drafter saved with the target's seed has the target's weights,
so it accepts 100 % of its drafts whenever it runs; another seed gives a useless drafter.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

VOCAB_SIZE = 1000
CACHE_ENV = "SPECMETRICS_MODEL_CACHE"


def default_cache() -> Path:
    return Path(os.environ.get(CACHE_ENV, Path.home() / ".cache" / "specmetrics" / "models"))


def corpus(lines: int = 2000) -> list[str]:
    """Deterministic text with a JSON flavour, so a JSON grammar has tokens to work with."""
    words = ["alpha", "beta", "gamma", "delta", "speculative", "decoding", "draft", "target", "token", "accept",
             "reject", "batch", "engine", "step", "model", "length", "grammar", "json", "value", "name"]
    out = []
    for i in range(lines):
        w = [words[(i * 7 + j * 3) % len(words)] for j in range(8)]
        out.append(" ".join(w) + f' {{"{w[0]}": {i % 97}, "{w[1]}": "{w[2]}", "ok": true}}')
    return out


def save_tokenizer(path: Path) -> None:
    """The BPE tokenizer every tiny model shares: ids 0-2 are <unk>, <s>, </s>."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(corpus(), trainer)
    tokenizer.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>")
    fast.save_pretrained(path)


def save_atomically(path: Path, write: Callable[[Path], None]) -> Path:
    """Run ``write`` into a scratch directory and rename it to ``path``, unless ``path`` is complete."""
    if (path / "config.json").exists():
        return path
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    write(tmp)
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)
    return path


def build_model(path: Path, seed: int) -> Path:
    """Save tokenizer + random tiny Llama weights at ``path`` unless already there."""

    def write(tmp: Path) -> None:
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM

        save_tokenizer(tmp)
        torch.manual_seed(seed)
        config = LlamaConfig(vocab_size=VOCAB_SIZE, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=2, num_key_value_heads=2, head_dim=32,
                             max_position_embeddings=4096, bos_token_id=1, eos_token_id=2,
                             tie_word_embeddings=False)
        LlamaForCausalLM(config).save_pretrained(tmp, safe_serialization=True)

    return save_atomically(path, write)


def tiny_models(cache: Path | None = None) -> dict[str, Path]:
    """``target``, ``same_drafter`` (the target's weights) and ``other_drafter`` (random)."""
    root = cache or default_cache()
    return {
        "target": build_model(root / "tiny-llama-target", seed=0),
        "same_drafter": build_model(root / "tiny-llama-same-drafter", seed=0),
        "other_drafter": build_model(root / "tiny-llama-other-drafter", seed=1),
    }
