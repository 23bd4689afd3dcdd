"""The opt-in CUDA-graph path (setting `graphs`): replays give the uncaptured path's bits, on new values in the same
buffers too, and never overwrite what an earlier call returned."""

from __future__ import annotations

import pytest
import torch
from sglang_attn_bridge import attention_varlen, graphs, settings
from sglang_attn_bridge.hf_attention import triton_attention_forward


class _Module(torch.nn.Module):
    is_causal = True
    num_key_value_groups = 4


def _hf_inputs(b, s, hq, hkv, d, gen):
    q = torch.randn(b, hq, s, d, generator=gen).to("cuda", torch.bfloat16).requires_grad_()
    k = torch.randn(b, hkv, s, d, generator=gen).to("cuda", torch.bfloat16).requires_grad_()
    v = torch.randn(b, s, hkv, d, generator=gen).to("cuda", torch.bfloat16).transpose(1, 2).detach().requires_grad_()
    do = torch.randn(b, s, hq, d, generator=gen).to("cuda", torch.bfloat16)
    return q, k, v, do


def _call(q, k, v, do, **kw):
    out, _ = triton_attention_forward(_Module(), q, k, v, None, scaling=q.shape[-1] ** -0.5, **kw)
    out.backward(do)
    got = [out.detach().clone()] + [x.grad.clone() for x in (q, k, v)]
    q.grad = k.grad = v.grad = None
    return got, out


@pytest.mark.parametrize("d", [128, 64])
def test_replays_give_the_uncaptured_bits(d):
    gen = torch.Generator().manual_seed(11)
    q, k, v, do = _hf_inputs(2, 1024, 32, 8, d, gen)
    graphs.clear()
    with settings.override(graphs=False):
        plain = [_call(q, k, v, do)[0]]
    held = []
    with settings.override(graphs=True):
        for i in range(4):  # plain call, capture, replays
            got, out = _call(q, k, v, do)
            held.append((out, got[0]))
            for name, a, b in zip(("o", "dq", "dk", "dv"), plain[0], got):
                assert torch.equal(a, b), f"call {i}: {name}"
        assert any(isinstance(e, tuple) for e in graphs._entries.values()), "nothing was captured"
        # new values in the same buffers: the replay reads them
        with torch.no_grad():
            for x in (q, k, v):
                x.copy_(torch.randn(x.shape, generator=gen).to(x.device, x.dtype))
            do.copy_(torch.randn(do.shape, generator=gen).to(do.device, do.dtype))
        fresh, _ = _call(q, k, v, do)
    with settings.override(graphs=False):
        ref, _ = _call(q, k, v, do)
    for name, a, b in zip(("o", "dq", "dk", "dv"), ref, fresh):
        assert torch.equal(a, b), f"new values: {name}"
    # outputs returned by earlier calls were copied out of the graph: later replays left them alone
    for out, first in held:
        assert torch.equal(out.detach(), first)
    graphs.clear()


def test_packed_calls_replay_with_the_uncaptured_bits():
    gen = torch.Generator().manual_seed(12)
    lens = [700, 1, 300, 47]
    t = sum(lens)
    q, k, v = (torch.randn(t, h, 128, generator=gen).to("cuda", torch.bfloat16) for h in (16, 4, 4))
    do = torch.randn(t, 16, 128, generator=gen).to("cuda", torch.bfloat16)
    cu = torch.tensor([0] + lens).cumsum(0).to("cuda", torch.int32)

    def run():
        xs = [x.detach().requires_grad_() for x in (q, k, v)]
        o = attention_varlen(*xs, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=700, max_seqlen_k=700)
        o.backward(do)
        return [o.detach().clone()] + [x.grad.clone() for x in xs]

    graphs.clear()
    with settings.override(graphs=False):
        plain = run()
    with settings.override(graphs=True):
        runs = [run() for _ in range(4)]
    for i, got in enumerate(runs):
        for name, a, b in zip(("o", "dq", "dk", "dv"), plain, got):
            assert torch.equal(a, b), f"call {i}: {name}"
    graphs.clear()
