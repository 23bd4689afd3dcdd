"""torch.compile over a small random-weight transformers model using the bridge: the attention call is one opaque
custom op (Inductor never sees the Triton kernels, Dynamo never traces the layout code), so whole-model compilation
works, with fullgraph=True too, and gives eager's logits and gradients."""

import copy

import pytest
import torch
from sglang_attn_bridge import register

VOCAB = 96


def _model():
    from transformers import LlamaConfig, LlamaForCausalLM

    register()
    cfg = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg)
    model.set_attn_implementation("triton")
    return model


def _step(model, **inputs):
    model.zero_grad()
    out = model(**inputs, labels=inputs["input_ids"])
    out.loss.backward()
    return out.logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("fullgraph", [False, True])
def test_compiled_model_matches_eager(fullgraph):
    torch._dynamo.reset()
    eager = _model()
    compiled = copy.deepcopy(eager)
    compiled.forward = torch.compile(compiled.forward, fullgraph=fullgraph)
    ids = torch.randint(0, VOCAB, (1, 36))
    # two packed sequences in one row (position_ids restart), then a padded batch of two rows
    pos = torch.cat([torch.arange(20), torch.arange(16)])[None]
    mask = torch.ones(2, 18, dtype=torch.long)
    mask[1, :5] = 0
    for inputs in (dict(input_ids=ids, position_ids=pos), dict(input_ids=ids.view(2, 18), attention_mask=mask)):
        le, ge = _step(eager, **inputs)
        lc, gc = _step(compiled, **inputs)
        real = inputs.get("attention_mask", torch.ones(le.shape[:2], dtype=torch.long)).bool()
        # Inductor fuses the norms and MLPs its own way (rounding moves); the attention op runs eager's kernels
        assert torch.allclose(lc[real], le[real], atol=1e-5, rtol=1e-4)
        for name, g in ge.items():
            assert torch.allclose(gc[name], g, atol=1e-5, rtol=1e-4), name


def test_custom_op_is_opaque_and_has_fake_shapes():
    from sglang_attn_bridge import custom_op

    q = torch.randn(2, 10, 4, 16)
    k = v = torch.randn(2, 10, 2, 16)
    args = (None, None, None, None, -1, -1, 0.25, True, -1, 0.0, True)
    torch.library.opcheck(
        custom_op.attention_op,
        (q, k, v, *args),
        test_utils=("test_schema", "test_faketensor", "test_autograd_registration"),
    )
    with torch._subclasses.FakeTensorMode():
        o, lse, o_bwd = custom_op.attention_op(
            torch.empty(2, 10, 4, 16), torch.empty(2, 10, 2, 16), torch.empty(2, 10, 2, 16), *args
        )
        assert o.shape == (2, 10, 4, 16) and lse.shape == (4, 20) and lse.dtype == torch.float32
        assert o_bwd.numel() == 0  # no sglang here: the backward uses o itself
