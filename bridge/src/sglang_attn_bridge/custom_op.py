"""The attention call: one forward and one backward implementation, a torch.library custom op around them, and the
single entry point `attention` that the transformers attention function and `attention_varlen` both call.

Dynamo cannot trace Triton launches it did not write, nor the layout code, which reads sequence lengths on the host,
so the op takes the tensors that describe the sequences (padding mask, position_ids, cu_seq_lens) and builds the
layout inside (cached per tensor object, so the layers of one forward pay for it once); fake implementations give
Inductor the output shapes. Under torch.compile `attention` calls the op. In eager mode it calls the same two
implementations through a plain autograd.Function (or, without gradients, directly): the dispatcher's checks around
a custom op cost more CPU time than a short attention call's launches (on the H200 machine's CPU), and they add
nothing when nothing traces. Both routes run the same functions, so they give the same bits.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from . import graphs, kernel_launches, layout
from .forward_selection import forward_impl, separate_backward_output
from .layout import Varlen
from .scoring import Scoring


class Sequences(NamedTuple):
    """What describes a call's sequences, in the ops' argument order (max lengths -1 for none). The layout is built
    from it inside an op, where lengths may be read on the host. A named tuple: the eager route builds one per call,
    and it costs no more than the tuple it names."""

    attention_mask: Tensor | None
    position_ids: Tensor | None
    cu_seq_lens_q: Tensor | None
    cu_seq_lens_k: Tensor | None
    max_length_q: int
    max_length_k: int

    def to_layout(self, q: Tensor, k: Tensor, seq: int = 1) -> Varlen:
        """The call's layout; `seq` is q's and k's sequence axis (2 for [B, H, S, D] tensors)."""
        return layout.build(
            q.shape[0],
            q.shape[seq],
            k.shape[seq],
            q.device,
            attention_mask=self.attention_mask,
            position_ids=self.position_ids,
            cu_seq_lens_q=self.cu_seq_lens_q,
            cu_seq_lens_k=self.cu_seq_lens_k,
            max_length_q=None if self.max_length_q < 0 else self.max_length_q,
            max_length_k=None if self.max_length_k < 0 else self.max_length_k,
        )


@torch.library.custom_op("sglang_attn_bridge::attention", mutates_args=())
def attention_op(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attention_mask: Tensor | None,
    position_ids: Tensor | None,
    cu_seq_lens_q: Tensor | None,
    cu_seq_lens_k: Tensor | None,
    max_length_q: int,
    max_length_k: int,
    scale: float,
    causal: bool,
    window: int,
    softcap: float,
    need_lse: bool,
) -> tuple[Tensor, Tensor, Tensor]:
    """q [B, Sq, Hq, D], k/v [B, Sk, Hkv, D] -> (o [B, Sq, Hq, D], lse [Hq, B*Sq] in kernel_launches.lse_dtype(q)
    or empty if not need_lse, the output the backward uses where it is not o (fp32 with sglang's forward), else
    empty). The sequences' arguments are `Sequences`' fields, the scoring ones `Scoring.op_args()`."""
    seqs = Sequences(attention_mask, position_ids, cu_seq_lens_q, cu_seq_lens_k, max_length_q, max_length_k)
    scoring = Scoring.from_op_args(scale, causal, window, softcap)
    o, lse, o_bwd = forward_impl(q, k, v, seqs.to_layout(q, k), scoring, need_lse)
    if lse is None:
        lse = q.new_empty((0,), dtype=torch.float32)
    return o, lse, q.new_empty((0,)) if o_bwd is None else o_bwd


@attention_op.register_fake
def _(q, k, v, *sequences_and_scores):
    """The shapes alone: they depend on q and on need_lse, the last argument."""
    need_lse = sequences_and_scores[-1]
    b, sq, hq, d = q.shape
    lse = (
        q.new_empty((hq, b * sq), dtype=kernel_launches.lse_dtype(q))
        if need_lse
        else q.new_empty((0,), dtype=torch.float32)
    )
    o_bwd = q.new_empty((b, sq, hq, d) if separate_backward_output(q.dtype, need_lse) else (0,))
    return q.new_empty((b, sq, hq, d)), lse, o_bwd


@torch.library.custom_op("sglang_attn_bridge::attention_backward", mutates_args=())
def attention_backward_op(
    do: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    o: Tensor,
    lse: Tensor,
    attention_mask: Tensor | None,
    position_ids: Tensor | None,
    cu_seq_lens_q: Tensor | None,
    cu_seq_lens_k: Tensor | None,
    max_length_q: int,
    max_length_k: int,
    scale: float,
    causal: bool,
    window: int,
    softcap: float,
) -> tuple[Tensor, Tensor, Tensor]:
    seqs = Sequences(attention_mask, position_ids, cu_seq_lens_q, cu_seq_lens_k, max_length_q, max_length_k)
    scoring = Scoring.from_op_args(scale, causal, window, softcap)
    return kernel_launches.backward(do, q, k, v, o, lse, seqs.to_layout(q, k), scoring)


@attention_backward_op.register_fake
def _(do, q, k, v, *saved_and_scores):
    return tuple(torch.empty_like(t if t.stride(-1) == 1 else t.contiguous()) for t in (q, k, v))


def _setup_context(ctx, inputs, output):
    q, k, v, mask, pos, cu_q, cu_k, max_q, max_k, scale, causal, window, softcap, _ = inputs
    o, lse, o_bwd = output
    ctx.save_for_backward(q, k, v, o_bwd if o_bwd.numel() else o, lse, mask, pos, cu_q, cu_k)
    ctx.args = (max_q, max_k, scale, causal, window, softcap)


def _backward(ctx, do, _dlse, _do_bwd):
    q, k, v, o, lse, mask, pos, cu_q, cu_k = ctx.saved_tensors
    dq, dk, dv = attention_backward_op(do.contiguous(), q, k, v, o, lse, mask, pos, cu_q, cu_k, *ctx.args)
    return dq, dk, dv, None, None, None, None, None, None, None, None, None, None, None


attention_op.register_autograd(_backward, setup_context=_setup_context)


def _graphed_forward(q, k, v, lay: Varlen, scoring: Scoring):
    """The eager forward with gradients, its launches replayed from a CUDA graph where the call repeats (graphs.py);
    the layout is built outside the graph (it may read lengths on the host)."""
    key = graphs.key("forward", (q, k, v), lay, scoring)
    return graphs.run(key, lambda: forward_impl(q, k, v, lay, scoring, True), (lay,))


def _graphed_backward(do, q, k, v, o, lse, lay: Varlen, scoring: Scoring):
    key = graphs.key("backward", (do, q, k, v, o, lse), lay, scoring)
    return graphs.run(key, lambda: kernel_launches.backward(do, q, k, v, o, lse, lay, scoring), (lay,))


def _bshd(t: Tensor, heads_first: bool) -> Tensor:
    return t.transpose(1, 2) if heads_first else t


class _Eager(torch.autograd.Function):
    """The op's forward and backward in eager mode, without the dispatcher (the module docstring says why). It
    takes the layout built once per call and the caller's head order: transformers' [B, H, S, D] tensors are
    turned into [B, S, H, D] views here, inside the Function, so autograd records no transpose nodes of its own (a
    fwd+bwd call is host-bound at short lengths, and each recorded view costs a node in both directions)."""

    @staticmethod
    def forward(ctx, q, k, v, call):
        lay, scoring, heads_first = call  # one argument: apply's Python walks each of them
        qt, kt, vt = _bshd(q, heads_first), _bshd(k, heads_first), _bshd(v, heads_first)
        if graphs.enabled(q):
            o, lse, o_bwd = _graphed_forward(qt, kt, vt, lay, scoring)
        else:
            o, lse, o_bwd = forward_impl(qt, kt, vt, lay, scoring, True)
        ctx.save_for_backward(qt, kt, vt, o if o_bwd is None else o_bwd, lse)
        ctx.lay, ctx.scoring, ctx.heads_first = lay, scoring, heads_first
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        impl = _graphed_backward if graphs.enabled(q) else kernel_launches.backward
        dq, dk, dv = impl(do.contiguous(), q, k, v, o, lse, ctx.lay, ctx.scoring)
        hf = ctx.heads_first
        return _bshd(dq, hf), _bshd(dk, hf), _bshd(dv, hf), None


def attention(
    q,
    k,
    v,
    scale: float,
    causal: bool = True,
    window=None,
    softcap=None,
    attention_mask=None,
    position_ids=None,
    cu_seq_lens_q=None,
    cu_seq_lens_k=None,
    max_length_q=None,
    max_length_k=None,
    heads_first: bool = False,
):
    """q [B, Sq, Hq, D], k/v [B, Sk, Hkv, D] views (head dim contiguous or not; heads_first: [B, H, S, D] views, as
    transformers passes them) -> o [B, Sq, Hq, D]. `window` in sglang's convention (query i sees key j iff
    i - j <= window), None for none; softcap 0 or None for none."""
    need_lse = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    max_q = -1 if max_length_q is None else int(max_length_q)
    max_k = -1 if max_length_k is None else int(max_length_k)
    scoring = Scoring.of(scale, causal, window, softcap)
    seqs = Sequences(attention_mask, position_ids, cu_seq_lens_q, cu_seq_lens_k, max_q, max_k)
    if torch.compiler.is_compiling():
        q, k, v = _bshd(q, heads_first), _bshd(k, heads_first), _bshd(v, heads_first)
        return attention_op(q, k, v, *seqs, *scoring.op_args(), need_lse)[0]
    lay = seqs.to_layout(q, k, 2 if heads_first else 1)
    if need_lse:
        return _Eager.apply(q, k, v, (lay, scoring, heads_first))
    q, k, v = _bshd(q, heads_first), _bshd(k, heads_first), _bshd(v, heads_first)
    return forward_impl(q, k, v, lay, scoring, False)[0]
