"""Tiny random-weight transformers models (from configs, no downloads): the bridge against eager attention."""

import copy

import pytest
import torch
from sglang_attn_bridge import register

VOCAB = 128


def _llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    return LlamaForCausalLM, cfg


def _qwen3(sliding=False):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    kw = dict(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=256,
    )
    if sliding:
        kw.update(
            use_sliding_window=True,
            sliding_window=12,
            max_window_layers=0,
            layer_types=["sliding_attention", "full_attention"],
        )
    return Qwen3ForCausalLM, Qwen3Config(**kw)


def _pair(factory):
    """The same random weights twice: eager and the bridge (each with its own config copy)."""
    register()
    cls, cfg = factory()
    torch.manual_seed(0)
    eager = cls(copy.deepcopy(cfg)).eval()
    eager.set_attn_implementation("eager")
    bridged = cls(copy.deepcopy(cfg)).eval()
    bridged.load_state_dict(eager.state_dict())
    bridged.set_attn_implementation("triton")
    assert bridged.config._attn_implementation == "triton"
    return eager, bridged


MODELS = {"llama": _llama, "qwen3": _qwen3, "qwen3-sliding": lambda: _qwen3(sliding=True)}


@pytest.mark.parametrize("name", list(MODELS))
def test_logits_and_grads_match_eager(name):
    eager, bridged = _pair(MODELS[name])
    ids = torch.randint(0, VOCAB, (2, 40))
    outs = []
    for m in (eager, bridged):
        m.zero_grad()
        out = m(input_ids=ids, labels=ids)
        out.loss.backward()
        outs.append((out.logits.detach(), {n: p.grad.clone() for n, p in m.named_parameters()}))
    (le, ge), (lb, gb) = outs
    assert torch.allclose(lb, le, atol=2e-4, rtol=1e-4)
    for n in ge:
        assert torch.allclose(gb[n], ge[n], atol=1e-4, rtol=1e-3), n


@pytest.mark.parametrize("name", ["llama", "qwen3"])
def test_packed_batch_equals_separate_sequences(name):
    _, bridged = _pair(MODELS[name])
    a, b = torch.randint(0, VOCAB, (1, 23)), torch.randint(0, VOCAB, (1, 41))
    with torch.no_grad():
        sep = torch.cat([bridged(input_ids=a).logits, bridged(input_ids=b).logits], 1)
        pos = torch.cat([torch.arange(23), torch.arange(41)])[None]
        packed = bridged(input_ids=torch.cat([a, b], 1), position_ids=pos).logits
        cu = torch.tensor([0, 23, 64], dtype=torch.int32)
        packed_cu = bridged(
            input_ids=torch.cat([a, b], 1),
            position_ids=pos,
            cu_seq_lens_q=cu,
            cu_seq_lens_k=cu,
            max_length_q=41,
            max_length_k=41,
        ).logits
    assert torch.allclose(packed, sep, atol=1e-5)
    assert torch.allclose(packed_cu, sep, atol=1e-5)


def test_padding_mask_is_honoured():
    eager, bridged = _pair(_llama)
    ids = torch.randint(0, VOCAB, (2, 30))
    mask = torch.ones(2, 30, dtype=torch.long)
    mask[1, 21:] = 0  # right padding
    with torch.no_grad():
        le = eager(input_ids=ids, attention_mask=mask).logits
        lb = bridged(input_ids=ids, attention_mask=mask).logits
        alone = bridged(input_ids=ids[1:, :21]).logits
    assert torch.allclose(lb[0], le[0], atol=2e-4)
    assert torch.allclose(lb[1, :21], le[1, :21], atol=2e-4)
    assert torch.allclose(lb[1, :21], alone[0], atol=1e-5)


def test_generation_with_cache_matches_eager():
    eager, bridged = _pair(_qwen3)
    ids = torch.randint(0, VOCAB, (1, 12))
    kw = dict(max_new_tokens=6, do_sample=False)
    assert torch.equal(bridged.generate(ids, **kw), eager.generate(ids, **kw))
