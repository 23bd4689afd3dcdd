"""The direct relaunch (launch.py, setting `direct_launch`) gives the bits of Triton's own launch path: the public
fwd+bwd with it off, then on (the first call of a key goes through Triton, the second is relaunched directly)."""

from __future__ import annotations

import pytest
import torch
from sglang_attn_bridge import launch, settings
from sglang_attn_bridge.hf_attention import triton_attention_forward


class _Module(torch.nn.Module):
    is_causal = True


@pytest.mark.parametrize("d,kw", [(128, {}), (64, {"softcap": 20.0}), (128, {"sliding_window": 100})])
def test_direct_launch_gives_the_bits_of_tritons_path(d, kw):
    gen = torch.Generator().manual_seed(4)
    q0 = torch.randn(2, 16, 512, d, generator=gen).to("cuda", torch.bfloat16)
    k0 = torch.randn(2, 4, 512, d, generator=gen).to("cuda", torch.bfloat16)
    v0 = torch.randn(2, 512, 4, d, generator=gen).to("cuda", torch.bfloat16).transpose(1, 2)
    do = torch.randn(2, 512, 16, d, generator=gen).to("cuda", torch.bfloat16)
    launch.clear()
    got = []
    for direct in (False, True, True):
        with settings.override(direct_launch=direct):
            q, k, v = (t.detach().requires_grad_() for t in (q0, k0, v0))
            o, _ = triton_attention_forward(_Module(), q, k, v, None, scaling=d**-0.5, **kw)
            o.backward(do)
        got.append([o.detach().clone(), q.grad, k.grad, v.grad])
    assert launch._kernels  # the direct path remembered the kernels it relaunched
    for other in got[1:]:
        assert all(torch.equal(a, b) for a, b in zip(got[0], other))
