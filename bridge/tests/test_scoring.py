"""The scoring record: one argument from the call to the launchers, flat only at the custom ops."""

import pytest
import torch
from sglang_attn_bridge import attention_varlen, kernel_launches
from sglang_attn_bridge.scoring import Scoring


@pytest.mark.parametrize(
    "scoring",
    [Scoring(0.125), Scoring(0.3, False, 0, 0.0), Scoring(0.2, True, 7, 30.0), Scoring(1.0, False, None, 2.5)],
)
def test_scoring_op_args_round_trip(scoring):
    args = scoring.op_args()
    assert [type(a) for a in args] == [float, bool, int, float]  # what the ops' schema takes
    assert Scoring.from_op_args(*args) == scoring
    assert args[2] == (-1 if scoring.window is None else scoring.window)  # window 0 is a window, not "none"


def test_scoring_of_normalizes_a_callers_values():
    s = Scoring.of(1, 1, 5.0, None)
    assert s == Scoring(1.0, True, 5, 0.0)
    assert [type(x) for x in s] == [float, bool, int, float]
    assert Scoring.of(0.5, False) == Scoring(0.5, False, None, 0.0)


def test_the_public_call_hands_one_scoring_to_the_launchers(monkeypatch):
    """attention_varlen, eager and through the custom op, gives the launchers the record its arguments describe."""
    seen = []
    real_fwd, real_bwd = kernel_launches.forward, kernel_launches.backward

    def fwd(q, k, v, lay, scoring, **kw):
        seen.append(("fwd", scoring))
        return real_fwd(q, k, v, lay, scoring, **kw)

    def bwd(do, q, k, v, o, lse, lay, scoring, **kw):
        seen.append(("bwd", scoring))
        return real_bwd(do, q, k, v, o, lse, lay, scoring, **kw)

    monkeypatch.setattr(kernel_launches, "forward", fwd)
    monkeypatch.setattr(kernel_launches, "backward", bwd)
    gen = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(30, h, 32, generator=gen).requires_grad_() for h in (4, 2, 2))
    cu = torch.tensor([0, 12, 30], dtype=torch.int32)
    want = Scoring(0.2, True, 6, 3.0)
    o = attention_varlen(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, window=(6, 0), softcap=3, scale=0.2)
    o.sum().backward()
    qo, ko, vo = (x.detach()[None].requires_grad_() for x in (q, k, v))
    o2, _, _ = torch.ops.sglang_attn_bridge.attention(qo, ko, vo, None, None, cu, cu, 18, 18, *want.op_args(), True)
    o2.sum().backward()
    assert seen == [("fwd", want), ("bwd", want)] * 2
    assert all(type(s) is Scoring for _, s in seen)
    assert torch.equal(o[None], o2) and torch.equal(q.grad[None], qo.grad)
