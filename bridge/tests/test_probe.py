"""The auto forward's probe (in the interpreter): an sglang kernel with the in-tree bits lets the in-tree forward run;
one that differs anywhere keeps sglang's kernel for that class, logged once with the reason; the env var forces."""

import functools
import json
import logging

import pytest
import torch
from sglang_attn_bridge import kernel_launches, layout, probe
from sglang_attn_bridge.custom_op import attention
from sglang_attn_bridge.forward_selection import select_forward
from sglang_attn_bridge.scoring import Scoring

NEW = "sglang.kernels.ops.attention.extend_attention"
calls = []


def _exact(
    q,
    o,
    k_buffer,
    v_buffer,
    k_scale,
    v_scale,
    qo_indptr,
    kv_indptr,
    kv_indices,
    prefix_lens,
    max_len_extend,
    custom_mask=None,
    mask_indptr=None,
    sm_scale=None,
    logit_cap=0.0,
    is_causal=True,
    sliding_window_size=-1,
    sinks=None,
    window_start_pos=None,
    xai_temperature_len=-1,
    page_size: int = 1,
    score_mod=None,
    aux_tensors=None,
):
    """sglang 0.5.23's signature; computes with the in-tree kernel, so its bits are the in-tree bits."""
    calls.append((is_causal, sliding_window_size, logit_cap))
    lay = layout.from_cu_seqlens(qo_indptr, kv_indptr, q.shape[0], k_buffer.shape[0])
    window = None if sliding_window_size < 0 else sliding_window_size
    out = kernel_launches.forward(
        q[None],
        k_buffer[kv_indices][None],
        v_buffer[kv_indices][None],
        lay,
        Scoring.of(sm_scale, is_causal, window, logit_cap),
    )[0]
    o.copy_(out[0])


@functools.wraps(_exact)
def _seeded_mismatch(*args, **kwargs):
    """The same, with one output element nudged by one ulp: a kernel that differs in a single bit somewhere."""
    _exact(*args, **kwargs)
    o = kwargs["o"]
    o.view(-1)[o.numel() // 2] = torch.nextafter(o.view(-1)[o.numel() // 2], torch.tensor(float("inf"), dtype=o.dtype))


def _call(causal=True):
    q, k, v = (torch.randn(1, 40, h, 64, dtype=torch.float16) for h in (4, 2, 2))
    return q, k, v, attention(q, k, v, 0.125, causal=causal)


def test_exact_kernel_lets_the_in_tree_forward_run(install_sglang, monkeypatch, caplog):
    install_sglang(NEW, _exact)
    calls.clear()
    with caplog.at_level(logging.INFO, logger="sglang_attn_bridge.probe"):
        q, k, v, _ = _call()
    assert calls, "the probe ran sglang's kernel"
    assert select_forward(q, k, v, Scoring(0.125, True)) is None  # decided: in-tree
    n = len(calls)
    _call()
    assert len(calls) == n  # the forward itself no longer calls sglang, and the decision is not re-probed
    assert "in-tree forward for float16 D64 causal (triton)" in caplog.text and "bitwise equal" in caplog.text


def test_seeded_mismatch_falls_back_for_that_class_and_logs_once(install_sglang, monkeypatch, caplog):
    install_sglang(NEW, _seeded_mismatch)
    calls.clear()
    with caplog.at_level(logging.WARNING, logger="sglang_attn_bridge.probe"):
        q, k, v, out = _call()
        n = len(calls)
        _call()
        assert len(calls) == n + 1  # sglang's kernel computes every forward of this class
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "sglang's kernel for float16 D64 causal" in warnings[0].message
    assert "1 of" in warnings[0].message  # the reason names the one differing element
    assert select_forward(q, k, v, Scoring(0.125, True)) is not None


def test_env_forces_either_forward(bridge_settings, install_sglang, monkeypatch):
    install_sglang(NEW, _seeded_mismatch)
    q, k, v = (torch.randn(1, 8, 2, 64, dtype=torch.float16) for _ in range(3))
    bridge_settings(forward="triton")
    assert select_forward(q, k, v, Scoring(0.125, True)) is None
    bridge_settings(forward="sglang")
    calls.clear()
    assert select_forward(q, k, v, Scoring(0.125, True)) is not None and not calls  # forced: no probe


def test_classes_are_decided_apart_and_kept_on_disk(bridge_settings, install_sglang, monkeypatch, tmp_path):
    """The window class mismatches, the plain causal class does not: each gets its own decision, and the cache file
    answers a fresh process (here: cleared memory) without probing again."""

    @functools.wraps(_exact)
    def window_differs(*args, **kwargs):
        (_seeded_mismatch if kwargs["sliding_window_size"] >= 0 else _exact)(*args, **kwargs)

    install_sglang(NEW, window_differs)
    cache = tmp_path / "probe.json"
    bridge_settings(probe_cache=str(cache))
    q, k, v = (torch.randn(1, 8, 2, 64, dtype=torch.float16) for _ in range(3))
    assert select_forward(q, k, v, Scoring(0.125, True)) is None
    assert select_forward(q, k, v, Scoring(0.125, True, 5)) is not None
    saved = json.loads(cache.read_text())
    assert sorted(d[0] for d in saved.values()) == [False, True]
    key = json.loads(next(iter(saved)))
    assert {"sglang", "triton", "device", "dtype", "head_dim", "causal", "window", "softcap", "kernel"} <= set(key)
    probe.clear()
    calls.clear()
    assert (
        select_forward(q, k, v, Scoring(0.125, True)) is None
        and select_forward(q, k, v, Scoring(0.125, True, 5)) is not None
    )
    assert not calls  # both answered from the file


def test_report_lines_list_each_class(install_sglang, monkeypatch):
    install_sglang(NEW, _exact)
    lines = probe.report_lines(torch.device("cpu"))
    assert [c for c, _, _ in lines] == [probe.describe(c) for c in probe.standard_classes(torch.device("cpu"))]
    assert all(choice == "in-tree" for _, choice, _ in lines)


def test_no_sglang_means_no_probe():
    assert probe.report_lines(torch.device("cpu")) == []


@pytest.mark.parametrize("bad", ["nan"])
def test_probe_that_cannot_trust_sglang_keeps_sglang(install_sglang, bad):
    @functools.wraps(_exact)
    def broken(*args, **kwargs):
        _exact(*args, **kwargs)
        kwargs["o"].fill_(float(bad))

    install_sglang(NEW, broken)
    q, k, v = (torch.randn(1, 8, 2, 64, dtype=torch.float16) for _ in range(3))
    assert select_forward(q, k, v, Scoring(0.125, True)) is not None


def test_fp32_keeps_sglangs_kernel_without_probing(install_sglang):
    """fp32: the in-tree forward computes IEEE fp32 and sglang's kernel TF32 on a GPU, so they never agree and no
    probe runs; the output is sglang's, the backward gets the in-tree fp32 forward's own output and LSE."""
    install_sglang(NEW, _exact)
    calls.clear()
    q, k, v = (torch.randn(1, 8, 2, 64) for _ in range(3))
    assert select_forward(q, k, v, Scoring(0.125, True)) is not None and not calls


def test_probe_inputs_reach_subnormal_outputs():
    """The large-logit probe case gives outputs in the subnormal range (the values ex2.approx.ftz flushed)."""
    cls = probe.ProbeClass("float16", 64, True, False, False, "triton")
    found = False
    for q, k, v, lay in probe._inputs(cls, "cpu", 0):
        o = kernel_launches.forward(q.float(), k.float(), v.float(), lay, Scoring(64**-0.5, True))[0]
        tiny = (o != 0) & (o.abs() < torch.finfo(torch.float32).tiny)
        found |= bool(tiny.any())
    assert found
