"""The kernel plan: which kernels, tiles and streams a call gets on each kind of device, that the launchers follow it,
and that `config.set_config` changes what it plans.

Targets other than this CPU are described, not present: the plan only reads what a `Target` says about a device.
"""

from dataclasses import replace

import pytest
import torch
from sglang_attn_bridge import config, kernel_launches, kernel_plan, layout
from sglang_attn_bridge.kernel_plan import Launch, Target, plan
from sglang_attn_bridge.scoring import Scoring
from triton import cdiv

HOPPER = Target(ptx=True, tma=True, gluon="", streams=True)  # an H200 with Triton 3.6
AMPERE = Target(ptx=True, tma=False, gluon="the Gluon kernels need a Hopper (sm_90) GPU: wgmma", streams=True)
ROCM = Target(ptx=False, tma=False, gluon="the Gluon kernels need a Hopper (sm_90) GPU: wgmma", streams=True)
needs_gluon_module = pytest.mark.skipif(
    kernel_plan.WS_ROWS is None, reason="this Triton cannot define the Gluon kernels"
)


def _qkv(hq, hkv, d, dtype=torch.bfloat16, seq=16):
    """Tensors of a call's shape (the plan does not depend on the sequence length, so a short one serves)."""
    return (
        torch.empty(1, seq, hq, d, dtype=dtype),
        torch.empty(1, seq, hkv, d, dtype=dtype),
        torch.empty(1, seq, hkv, d, dtype=dtype),
    )


@pytest.fixture
def gpu_tables(monkeypatch):
    """The GPU tuning tables as committed, restored after the test (set_config writes into them)."""
    monkeypatch.setattr(config, "GPU_FWD", dict(config.GPU_FWD))
    monkeypatch.setattr(config, "GPU_BWD", dict(config.GPU_BWD))


@needs_gluon_module
def test_hopper_runs_both_gluon_kernels_at_d128_with_gqa(gpu_tables):
    p = plan(*_qkv(32, 8, 128), target=HOPPER)
    assert p.forward == Launch("gluon", 192, 64, 4, 4, 128, True)
    assert p.dkdv == Launch("gluon", 64, 64, 4, 2, 0, True) and p.pairs
    assert p.dq == Launch("gluon", 64, 64, 4, 2, 0, True) and p.dq_pairs and p.dq_defer
    assert (p.interior, p.exp_ftz, p.fast, p.l2_group_mb, p.streams) == (3, False, False, 32, 2)
    assert p.why[0].startswith("forward: Gluon") and p.why[1].startswith("dK/dV: Gluon")
    assert p.why[2].startswith("dQ: Gluon")


def test_hopper_at_d64_keeps_the_triton_forward_and_needs_gqa_for_gluon_dkdv(gpu_tables):
    gqa = plan(*_qkv(32, 8, 64), target=HOPPER)
    assert gqa.forward == Launch("triton", 64, 64, 4, 3, 0, False)
    assert (gqa.interior, gqa.exp_ftz) == (3, False)  # sglang's arithmetic: an unfused scale, its exp
    assert gqa.dkdv.kernel == "gluon" and not gqa.pairs
    mha = plan(*_qkv(16, 16, 64), target=HOPPER)
    assert mha.dkdv == Launch("triton", 32, 64, 4, 3, 0, False)
    assert "GQA group of 1" in mha.why[1]
    assert mha.dq == Launch("gluon", 64, 64, 4, 2, 0, True)  # a dQ program's work does not depend on the group


@needs_gluon_module
@pytest.mark.parametrize(
    "case, reason",
    [
        (dict(window=4095), "sliding window"),
        (dict(softcap=30.0), "softcap"),
        (dict(compute_o=False), "LSE only"),
    ],
)
def test_hopper_sends_what_gluon_does_not_cover_to_triton(gpu_tables, case, reason):
    p = plan(*_qkv(32, 8, 128), target=HOPPER, **case)
    assert p.forward == Launch("triton", 128, 64, 8, 2, 128, True)  # the D128 Triton fields: TMA, 128-register cap
    assert reason in p.why[0]
    if "compute_o" not in case:
        assert p.dkdv == Launch("triton", 64, 128, 8, 1, 0, False) and reason in p.why[1]
        assert p.dq == Launch("triton", 128, 32, 8, 3, 128, False) and reason in p.why[2]
    else:  # the LSE-only forward says nothing about the backward
        assert p.dkdv.kernel == "gluon"


def test_hopper_dtype_head_dim_and_layout_rules(gpu_tables):
    assert "float32" in plan(*_qkv(32, 8, 128, torch.float32), target=HOPPER).why[0]
    padded = plan(*_qkv(8, 2, 80), target=HOPPER)  # bucket 128, but Gluon covers 64 and 128 only
    assert padded.forward.kernel == padded.dkdv.kernel == "triton" and "head dim 80" in padded.why[1]
    q, k, v = _qkv(32, 8, 128)
    heads_apart = torch.empty(1, 32, 16, 128, dtype=torch.bfloat16).transpose(1, 2)  # transformers' [B, H, S, D]
    p = plan(heads_apart, k, v, target=HOPPER)
    assert p.dkdv.kernel == "triton" and "side by side" in p.why[1]
    assert p.dq.kernel == "gluon"  # one program per query head: any head layout TMA can load
    p = plan(q, k, v, do=heads_apart, target=HOPPER)
    assert p.dkdv.kernel == "triton" and "side by side" in p.why[1]
    odd = torch.empty(1, 16, 32, 129, dtype=torch.bfloat16)[..., 1:]  # 2-byte offset: TMA cannot load it
    p = plan(odd, k, v, target=HOPPER)
    assert p.forward.kernel == "triton" and "16-byte" in p.why[0] and not p.forward.tma
    assert p.dq.kernel == "triton" and "16-byte" in p.why[2]


def test_hopper_reads_a_whole_row_head_major_q_in_place_for_gluon_dkdv(gpu_tables):
    """transformers' [B, H, S, D] q: the Gluon dK/dV kernel addresses a GQA group's heads as row blocks when every
    sequence is a whole row and S is a multiple of its query tile; otherwise it needs heads side by side."""
    k = v = torch.empty(2, 128, 8, 128, dtype=torch.bfloat16)
    q = torch.empty(2, 32, 128, 128, dtype=torch.bfloat16).transpose(1, 2)
    assert kernel_plan.q_head_rows(q, True, 64) == 128
    assert plan(q, k, v, target=HOPPER, whole_rows=True).dkdv.kernel == "gluon"
    packed = plan(q, k, v, target=HOPPER)  # sequences packed in a row: a tile could reach the next head's rows
    assert packed.dkdv.kernel == "triton" and "whole rows" in packed.why[1]
    assert kernel_plan.q_head_rows(q, False, 64) == 0
    ragged = torch.empty(2, 32, 100, 128, dtype=torch.bfloat16).transpose(1, 2)  # 100 rows: not whole tiles
    assert kernel_plan.q_head_rows(ragged, True, 64) == 0
    side_by_side = torch.empty(2, 128, 32, 128, dtype=torch.bfloat16)
    assert kernel_plan.q_head_rows(side_by_side, True, 64) == 0  # the column form serves it


def test_a_second_stream_only_for_long_calls(gpu_tables):
    q, k, v = _qkv(32, 8, 128)
    assert plan(q, k, v, target=HOPPER, long_call=True).streams == 2
    short = plan(q, k, v, target=HOPPER, long_call=False)
    assert short.streams == 1 and "short call" in short.why[3]
    assert config.GPU_BWD[128].overlap_min_scores > 32 * 2 * 2048 * 2048  # 2x2048 tokens, 32 heads: short


@pytest.mark.parametrize("target", [AMPERE, ROCM], ids=["ampere", "rocm"])
def test_other_gpus_get_the_triton_kernels_and_ptx_only_on_nvidia(gpu_tables, target):
    p = plan(*_qkv(32, 8, 128), target=target)
    assert p.forward == Launch("triton", 128, 64, 8, 2, 128, False)  # TMA wanted, but no copy engine
    assert p.dkdv.kernel == "triton" and "Hopper" in p.why[1]
    assert p.interior == (3 if target.ptx else 1)  # mul.rn is PTX; the select of interior=1 rounds the same
    assert not p.exp_ftz  # not exact: never in the committed tables
    assert p.streams == 2


def test_this_cpu_under_the_interpreter_plans_the_interpreter_tiles():
    p = plan(*_qkv(32, 8, 128, torch.float32))
    assert config.interpreting()
    assert p.forward == Launch("triton", 32, 64, 4, 1, 0, False)
    assert p.dkdv == Launch("triton", 32, 32, 4, 1, 0, False) == p.dq
    assert p.streams == 1 and "interpreter" in p.why[0]


def test_gluon_unavailable_names_the_reason(bridge_settings, monkeypatch):
    """The Gluon kernels are written for Triton 3.6 on Hopper: any other Triton or device gets the Triton kernels
    and the doctor a reason, never a compile error at the first call. Availability is looked up, not tried."""
    cpu = torch.device("cpu")
    assert "3.9.0" in kernel_plan.gluon_api_missing("3.9.0") and "3.5.1" in kernel_plan.gluon_api_missing("3.5.1")
    monkeypatch.setattr(kernel_plan, "dkdv_sm90_kernel", object())  # as if this Triton's Gluon had defined it
    assert "Hopper" in kernel_plan.gluon_unavailable(cpu)  # the right Triton, no Hopper GPU
    monkeypatch.setattr(kernel_plan, "dkdv_sm90_kernel", None)
    monkeypatch.setattr(kernel_plan, "_GLUON_MISSING", "this Triton has no Gluon")
    assert kernel_plan.gluon_unavailable(cpu) == "this Triton has no Gluon"
    bridge_settings(interpreter=False)
    assert Target.of(cpu) == Target(gluon="this Triton has no Gluon")
    bridge_settings(portable=True)
    assert "portable" in Target.of(cpu).gluon


def test_set_config_applies_fields_of_either_config_and_the_plan_follows(gpu_tables):
    d64 = config.GPU_FWD[64], config.GPU_BWD[64]
    config.set_config(128, gluon_pairs=False, block_m2=64, num_stages2=2, gluon_group_mb=8)
    assert config.GPU_BWD[128].gluon_pairs is False and config.GPU_BWD[128].block_m2 == 64
    assert config.GPU_BWD[128].num_stages2 == 2 and config.GPU_FWD[128].gluon_group_mb == 8
    assert (config.GPU_FWD[64], config.GPU_BWD[64]) == d64  # other buckets untouched
    config.set_config(100, gluon_dkdv=(), gluon_dq=(), tma2=True)  # 100 is in the 128 bucket
    p = plan(*_qkv(32, 8, 128), target=HOPPER)
    assert p.dkdv == Launch("triton", 64, 128, 8, 1, 0, False) and "tuned choice" in p.why[1]
    assert p.dq == Launch("triton", 64, 32, 8, 2, 128, True) and p.l2_group_mb == 8
    config.set_config(128, bwd=replace(config.GPU_BWD[128], overlap=False), interior=1)
    p = plan(*_qkv(32, 8, 128), target=HOPPER, window=100)
    assert p.streams == 1 and "overlap is off" in p.why[3] and p.interior == 1


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(num_warps=4), "num_warps is a field of both"),
        (dict(max_regs2=128, block_m3=8), "unknown field(s) block_m3"),
        (dict(gluon_pair=True), "unknown field(s) gluon_pair"),
    ],
)
def test_set_config_refuses_unknown_and_ambiguous_fields(gpu_tables, changes, message):
    before = dict(config.GPU_FWD), dict(config.GPU_BWD)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        config.set_config(128, **changes)
    assert (config.GPU_FWD, config.GPU_BWD) == before  # nothing half-applied


class _Spy:
    """Stands in for `kernel[grid]`: records the grid and launch keywords, then runs the real kernel (`run=True`, the
    Triton kernels here) or nothing (the Gluon kernels, which need a Hopper GPU)."""

    def __init__(self, kernel, run=True):
        self.kernel, self.run, self.calls = kernel, run, []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.calls.append((grid, kwargs))
            if self.run:
                self.kernel[grid](*args, **kwargs)

        return launch


def test_the_triton_launchers_follow_the_plan(monkeypatch):
    """With tiles and switches unlike the defaults, each launch gets exactly the plan's tiles, warps, stages, TMA and
    arithmetic, and the results agree with the default tiles' (the kernels really run)."""
    lens = [70, 33]
    q = torch.randn(1, 103, 4, 64)
    k, v = torch.randn(1, 103, 2, 64), torch.randn(1, 103, 2, 64)
    cu = torch.tensor([0, 70, 103], dtype=torch.int32)
    lay = layout.from_cu_seqlens(cu, cu, 103, 103)
    o_default, lse_default = kernel_launches.forward(q, k, v, lay, Scoring(0.125, True))
    do = torch.randn_like(o_default)
    grads_default = kernel_launches.backward(do, q, k, v, o_default, lse_default, lay, Scoring(0.125, True))
    monkeypatch.setattr(config, "INTERPRETER_FWD", config.FwdConfig(16, 64, 2, 2, interior=3, tma=True))
    monkeypatch.setattr(config, "INTERPRETER_BWD", config.BwdConfig(16, 64, 64, 16, 4, 1, 2, 2, tma2=True))
    spies = {name: _Spy(getattr(kernel_launches, name)) for name in ("attn_fwd_kernel", "dkdv_kernel", "dq_kernel")}
    for name, spy in spies.items():
        monkeypatch.setattr(kernel_launches, name, spy)
    o, lse = kernel_launches.forward(q, k, v, lay, Scoring(0.125, True))
    grads = kernel_launches.backward(do, q, k, v, o, lse, lay, Scoring(0.125, True))
    p = plan(q, k, v, do=do)
    for name, launch, blocks in (
        ("attn_fwd_kernel", p.forward, max(lens)),
        ("dkdv_kernel", p.dkdv, max(lens)),
        ("dq_kernel", p.dq, max(lens)),
    ):
        ((grid, kw),) = spies[name].calls
        assert (kw["BLOCK_M"], kw["BLOCK_N"], kw["num_warps"], kw["num_stages"], kw["TMA"]) == (
            launch.rows,
            launch.keys,
            launch.warps,
            launch.stages,
            launch.tma,
        ), name
        per = launch.keys if name == "dkdv_kernel" else launch.rows
        assert grid[2] == cdiv(blocks, per), name
    fwd_kw = spies["attn_fwd_kernel"].calls[0][1]
    assert (fwd_kw["INTERIOR"], fwd_kw["EXP_FTZ"], fwd_kw["FAST"]) == (p.interior, p.exp_ftz, p.fast)
    assert (p.interior, p.exp_ftz, p.fast) == (1, False, False)  # interior=3 runs as 1 in the interpreter
    assert p.dq == Launch("triton", 64, 16, 2, 2, 0, True) and p.dkdv.tma is False
    for name, got, want in zip(
        ("o", "lse", "dq", "dk", "dv"), (o, lse, *grads), (o_default, lse_default, *grads_default)
    ):
        assert torch.allclose(got, want, rtol=1e-4, atol=1e-5), name


@needs_gluon_module
def test_the_gluon_launchers_follow_a_hopper_plan(monkeypatch, gpu_tables):
    """On a Hopper plan the launchers take the Gluon forward, dK/dV and dQ with the plan's numbers and put dQ beside
    dK/dV on a second stream. The Gluon kernels cannot run here, so they are only recorded."""
    real_plan = kernel_plan.plan
    monkeypatch.setattr(kernel_plan, "plan", lambda *a, **kw: real_plan(*a, target=HOPPER, **kw))
    spies = {
        name: _Spy(None, run=False)
        for name in ("attn_fwd_ws_sm90_kernel", "dkdv_sm90_kernel", "dq_sm90_kernel", "delta_kernel")
    }
    for name, spy in spies.items():
        monkeypatch.setattr(kernel_launches, name, spy)
    monkeypatch.setattr(kernel_launches, "_sm_count", lambda device: 132)
    order = []
    monkeypatch.setattr(
        kernel_launches,
        "_side_by_side",
        lambda first, second, device: (order.append("side by side"), first(), second()),
    )
    q = torch.zeros(1, 1000, 32, 128, dtype=torch.bfloat16)
    k = v = torch.zeros(1, 1000, 8, 128, dtype=torch.bfloat16)
    cu = torch.tensor([0, 400, 1000], dtype=torch.int32)
    lay = layout.from_cu_seqlens(cu, cu, 1000, 1000)
    o, lse = kernel_launches.forward(q, k, v, lay, Scoring(0.1, True))
    kernel_launches.backward(torch.zeros_like(o), q, k, v, o, lse, lay, Scoring(0.1, True))
    p = real_plan(q, k, v, target=HOPPER)
    ((grid, kw),) = spies["attn_fwd_ws_sm90_kernel"].calls
    items = 32 * 2 * cdiv(600, p.forward.rows)  # (head, sequence) pairs x row blocks of the longest sequence
    assert grid == (min(items, 132),)
    assert (
        (kw["STAGES"], kw["INTERIOR"], kw["EXP_FTZ"], kw["num_warps"], kw["maxnreg"])
        == (p.forward.stages, p.interior, p.exp_ftz, p.forward.warps, p.forward.max_regs)
        == (4, 3, False, 4, 128)
    )
    ((grid, kw),) = spies["dkdv_sm90_kernel"].calls
    assert grid == (cdiv(cdiv(600, 64), 2), 8, 2) and kw["PAIRS"] is True  # key blocks in pairs
    assert (kw["BLOCK_M"], kw["BLOCK_N"], kw["num_warps"]) == (64, 64, 4)
    ((grid, kw),) = spies["dq_sm90_kernel"].calls
    assert grid == (cdiv(cdiv(600, 64), 2), 32, 2) and (kw["PAIRS"], kw["DEFER"]) == (True, True)  # blocks in pairs
    assert (kw["BLOCK_M"], kw["BLOCK_N"], kw["num_warps"]) == (64, 64, 4)
    assert order == []  # 32 x 2 x 600 x 600 scores: a short call keeps dQ on the caller's stream
    long = torch.zeros(1, 8192, 32, 128, dtype=torch.bfloat16)
    long_kv = torch.zeros(1, 8192, 8, 128, dtype=torch.bfloat16)
    lay = layout.dense(1, 8192, 8192, long.device)
    o, lse = kernel_launches.forward(long, long_kv, long_kv, lay, Scoring(0.1, True))
    kernel_launches.backward(torch.zeros_like(o), long, long_kv, long_kv, o, lse, lay, Scoring(0.1, True))
    assert order == ["side by side"]
