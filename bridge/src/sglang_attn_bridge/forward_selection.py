"""Which forward computes a call's output, and the forward itself: sglang's kernel (or ours) on [B, S, H, D] views.

Under the `auto` forward with sglang installed, the in-tree forward runs for every configuration class where the
probe (probe.py) found it bitwise equal to sglang's kernel on this device, and sglang's kernel for the rest. With
sglang's kernel, the output comes from it (bitwise what inference computes) and, only when gradients are needed, our
forward kernel in log-sum-exp-only mode supplies the LSE that sglang's kernel does not return. With the in-tree
forward, output and LSE come from one launch. The autograd wiring is the custom op's (custom_op.py): there is one path.
"""

from __future__ import annotations

import torch

from . import kernel_launches, probe, settings
from .errors import SglangKernelError
from .kernel_plan import tensor_key
from .layout import Varlen
from .scoring import Scoring
from .sglang_resolution import SglangKernel, resolve, sglang_forward


def select_forward(q=None, k=None, v=None, scoring: Scoring | None = None) -> SglangKernel | None:
    """sglang's kernel, or None for the in-tree one. Forced by the `forward` setting; under auto the in-tree one
    where sglang is absent, or where the probe proved it bitwise equal for this call's class (given the call's
    q/k/v and scoring; without them, sglang's kernel). An installed-but-broken sglang is an error, not a silent
    switch (training logprobs would stop matching inference)."""
    mode = settings.current().forward
    if mode == "triton":
        return None
    res = resolve()
    if res.kernel is None:
        if mode == "sglang" or res.installed:
            raise SglangKernelError(
                f"sglang's {'' if res.installed else 'kernel is required but '}"
                f"extend_attention_fwd_unified cannot be used: {res.reason}. "
                f"Set {settings.ENV['forward']}=triton to use the in-tree forward."
            )
        return None
    if mode == "sglang" or q is None or scoring is None or q.dtype == torch.float32:
        # fp32: the in-tree forward computes IEEE fp32, sglang's TF32, so they never agree: no probe to run
        return res.kernel
    # the decision per call signature (the key names the device through its target), worked out once: the class
    # needs the kernel plan, and every call asks
    key, cfgs = kernel_launches.call_key("select", q, (id(res.kernel), tensor_key(q), tensor_key(k), tensor_key(v)))
    key += (scoring.causal, scoring.window is None, bool(scoring.softcap))
    hit = _selected.get(key)
    if hit is None:
        cls = probe.class_of(q, k, v, scoring)
        if len(_selected) > 4096:
            _selected.clear()
        hit = _selected[key] = (probe.decide(res.kernel, cls, q.device).in_tree, res.kernel, cfgs)
    return None if hit[0] else res.kernel


_selected: dict = {}
settings.on_change(_selected.clear)  # the forward mode, portable and the probe cache are settings


def separate_backward_output(dtype: torch.dtype, need_lse: bool) -> bool:
    """Whether the backward gets an output of its own (fp32 with sglang's forward: see forward_impl)."""
    return need_lse and dtype == torch.float32 and select_forward() is not None


def forward_impl(q, k, v, lay: Varlen, scoring: Scoring, need_lse: bool):
    """(o, lse or None, o for the backward or None when it is o): the forward the selection picks for this call.

    fp32 with sglang's kernel: sglang computes fp32 attention with TF32 products, so its output (the one returned,
    inference's bits) is ~1e-3 from the exact result; the backward gets the in-tree fp32 forward's output and LSE
    (IEEE products, libdevice exp/log) instead, so the gradients are those of exact attention to fp32 accuracy."""
    kernel = select_forward(q, k, v, scoring)
    if kernel is None:
        o, lse = kernel_launches.forward(q, k, v, lay, scoring)
        return o, lse, None
    o = sglang_forward(kernel, q, k, v, lay, scoring)
    if not need_lse:
        return o, None, None
    exact = q.dtype == torch.float32
    o_bwd, lse = kernel_launches.forward(q, k, v, lay, scoring, compute_o=exact)
    return o, lse, o_bwd
