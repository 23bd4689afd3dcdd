"""GPU correctness for the bridge, all checks in one run; prints a table, writes JSON to $OUT (or ./out).

1. bit-exactness: the bridge's forward (sglang path) and the in-tree forward against sglang's own
   extend_attention_fwd_unified, called directly on the same bf16 inputs (torch.equal), batch 1 and packed;
2. bf16/fp16 forward+backward against a float32 reference with FlashAttention's rule:
   max|kernel - ref32| <= 2 * max|torch_same_dtype - ref32| + atol, fresh random inputs per check;
3. determinism: 10 backward runs, bitwise identical dQ/dK/dV; TMA tile loads and masked loads give the same bits;
   the Gluon forward and dK/dV kernels agree with the Triton ones (and exp_ftz with plain exp); dQ on a second
   stream gives the bits of one stream;
4. end to end: a tiny random-weight Qwen3 in bf16 trains a few steps with the bridge next to eager; packed batch
   equals separate sequences.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import replace

import torch
from common import load_sglang, make_qkv, packed_lengths
from sglang_attn_bridge import config, custom_op, kernel_launches, kernel_plan, layout
from sglang_attn_bridge.reference import reference_attention
from sglang_attn_bridge.scoring import Scoring
from sglang_attn_bridge.sglang_resolution import resolve, sglang_forward

OUT = os.environ.get("OUT", "out")
rows = []


def record(check, case, ok, detail):
    rows.append(dict(check=check, case=case, ok=bool(ok), detail=detail))
    print(f"{'PASS' if ok else 'FAIL'} {check:14} {case:40} {detail}", flush=True)


def bit_exact(mod):
    fn = mod.extend_attention_fwd_unified
    kern = resolve(refresh=True).kernel
    record("resolve", "sglang kernel", kern is not None, kern.generation if kern else resolve().reason)
    for hq, hkv in ((32, 8), (16, 16)):
        for d in (64, 128):
            for name, lens in (("batch1 S=3000", [3000]), ("packed 5 seqs", [700, 64, 1, 1500, 333])):
                q, k, v, cu = make_qkv(lens, hq, hkv, d, torch.bfloat16)
                t = sum(lens)
                o_ref = torch.empty(t, hq, d, device="cuda", dtype=torch.bfloat16)
                fn(
                    q=q[0],
                    o=o_ref,
                    k_buffer=k[0],
                    v_buffer=v[0],
                    k_scale=1.0,
                    v_scale=1.0,
                    qo_indptr=cu,
                    kv_indptr=cu,
                    kv_indices=torch.arange(t, device="cuda"),
                    prefix_lens=torch.zeros(len(lens), dtype=torch.int32, device="cuda"),
                    max_len_extend=max(lens),
                    sm_scale=d**-0.5,
                )
                lay = layout.from_cu_seqlens(cu, cu, t, t)
                o_bridge = sglang_forward(kern, q, k, v, lay, Scoring(d**-0.5, True))[0]
                o_own = kernel_launches.forward(q, k, v, lay, Scoring(d**-0.5, True))[0][0]
                case = f"{hq}/{hkv} D{d} {name}"
                record("bitexact-sgl", case, torch.equal(o_bridge, o_ref), "bridge(sglang path) vs sglang")
                diff = (o_own.float() - o_ref.float()).abs().max().item()
                record("bitexact-own", case, torch.equal(o_own, o_ref), f"in-tree vs sglang max|diff|={diff:.3g}")
    # window and softcap through both kernels
    for label, hf_window, cap in (("window 256", 256, 0.0), ("softcap 30", None, 30.0)):
        lens = [1000, 777]
        q, k, v, cu = make_qkv(lens, 16, 4, 128, torch.bfloat16)
        lay = layout.from_cu_seqlens(cu, cu, sum(lens), sum(lens))
        w = None if hf_window is None else hf_window - 1
        o_s = sglang_forward(kern, q, k, v, lay, Scoring.of(0.09, True, w, cap))
        o_o = kernel_launches.forward(q, k, v, lay, Scoring.of(0.09, True, w, cap))[0]
        diff = (o_o.float() - o_s.float()).abs().max().item()
        record("bitexact-own", f"16/4 D128 {label}", torch.equal(o_o, o_s), f"max|diff|={diff:.3g}")


def fa_rule(dtype, label, lens, hq, hkv, d, causal=True, hf_window=None, softcap=None, scale=None):
    scale = scale or d**-0.5
    q, k, v, cu = make_qkv(lens, hq, hkv, d, dtype, requires_grad=True)
    o = custom_op.attention(
        q,
        k,
        v,
        scale,
        causal,
        None if hf_window is None else hf_window - 1,
        softcap,
        cu_seq_lens_q=cu,
        cu_seq_lens_k=cu,
    )
    do = torch.randn_like(o)
    got = [o] + list(torch.autograd.grad(o, (q, k, v), do))

    def ref(prec):
        xs = [x.detach().to(prec).requires_grad_() for x in (q, k, v)]
        outs = []
        for b in range(len(lens)):
            s, e = int(cu[b]), int(cu[b + 1])
            outs.append(
                reference_attention(
                    *(x[0, s:e].transpose(0, 1) for x in xs), scale, causal=causal, window=hf_window, softcap=softcap
                ).transpose(0, 1)
            )
        out = torch.cat(outs)[None]
        return [out] + list(torch.autograd.grad(out, xs, do.to(prec)))

    r32, rlow = ref(torch.float32), ref(dtype)
    worst = []
    ok = True
    for name, g, a, b in zip(("o", "dq", "dk", "dv"), got, r32, rlow):
        err = (g.float() - a).abs().max().item()
        base = (b.float() - a).abs().max().item()
        ok &= bool(torch.isfinite(g).all()) and err <= 2 * base + 1e-4
        rel = ((g.float() - a).norm() / a.norm()).item()
        worst.append(f"{name} {err:.2e}<=2*{base:.2e} rel {rel:.1e}")
    record("fa-rule", f"{str(dtype)[6:]} {label}", ok, "; ".join(worst))


def determinism():
    lens = packed_lengths(4096, 5, seed=3)
    q, k, v, cu = make_qkv(lens, 32, 8, 128, torch.bfloat16, requires_grad=True)
    o = custom_op.attention(q, k, v, 128**-0.5, cu_seq_lens_q=cu, cu_seq_lens_k=cu)
    do = torch.randn_like(o)
    first = torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
    same = True
    for _ in range(9):
        again = torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
        same &= all(torch.equal(a, b) for a, b in zip(first, again))
    o2 = custom_op.attention(q, k, v, 128**-0.5, cu_seq_lens_q=cu, cu_seq_lens_k=cu)
    record("determinism", "32/8 D128 packed 4096, 10 bwd", same and torch.equal(o, o2), "bitwise dq/dk/dv and o")


# The cases' labels: what the kernel plan (the launchers' one source) picks for these inputs.
def _tma_used(*tensors: torch.Tensor) -> bool:
    return kernel_plan.Target.of(tensors[0].device).tma and all(map(kernel_plan.tma_aligned, tensors))


def _gluon_fwd_used(q, k, v) -> bool:
    return kernel_plan.plan(q, k, v, None, 0.0, True).forward.kernel == "gluon"


def _gluon_dkdv_used(q, k, v, do) -> bool:
    return kernel_plan.plan(q, k, v, None, 0.0, do=do).dkdv.kernel == "gluon"


def tma_paths():
    """Forward and backward through TMA descriptors vs masked loads: bitwise equal (packed, padded, odd D)."""
    for label, lens, hq, hkv, d in (
        ("32/8 D128 packed", packed_lengths(3000, 5, 4), 32, 8, 128),
        ("16/16 D64 packed", [1, 700, 64, 1000], 16, 16, 64),
        ("8/2 D80 packed", [333, 517], 8, 2, 80),
    ):
        q, k, v, cu = make_qkv(lens, hq, hkv, d, torch.bfloat16)
        t = sum(lens)
        lay = layout.from_cu_seqlens(cu, cu, t, t)
        saved = config.fwd_config(d), config.bwd_config(d)
        used = _tma_used(q, k, v)
        outs = []
        do = torch.randn_like(q)
        for tma in (True, False):  # the Triton forward (the Gluon one always loads by TMA: gluon-fwd below)
            config.set_config(d, fwd=replace(saved[0], tma=tma, gluon_ws=0), bwd=replace(saved[1], tma=tma, tma2=tma))
            o, lse = kernel_launches.forward(q, k, v, lay, Scoring(d**-0.5, True))
            outs.append((o, lse, *kernel_launches.backward(do, q, k, v, o, lse, lay, Scoring(d**-0.5, True))))
        config.set_config(d, fwd=saved[0], bwd=saved[1])
        same = [n for n, a, b in zip(("o", "lse", "dq", "dk", "dv"), *outs) if torch.equal(a, b)]
        record("tma-paths", label, used and len(same) == 5, f"TMA used={used}; bitwise equal: {', '.join(same)}")


def gluon_fwd():
    """The Gluon forward (Hopper, persistent, warp-specialised) against the Triton forward, exp_ftz on against off,
    and the default L2 grouping against 1 MB groups (several, the last one partial), on the same inputs: bitwise
    equal o and LSE. Cases the speed shapes do not reach: a cached prefix (len_k > len_q), a 1-token sequence, fp16,
    non-causal, and logits scaled x20 / x40 so that many probabilities fall below 2^-126 (where exp_ftz returns 0
    instead of a subnormal)."""
    d = 128
    for label, lq, lk, hq, hkv, dtype, causal, mul in (
        ("32/8 packed q*20", [700, 64, 1, 1500, 333], None, 32, 8, torch.bfloat16, True, 20.0),
        ("8/2 1x3000 q*40", [3000], None, 8, 2, torch.bfloat16, True, 40.0),
        ("16/4 prefix 300+200,700+129,1+63", [300, 700, 1], [500, 829, 64], 16, 4, torch.bfloat16, True, 1.0),
        ("16/16 1x3000 fp16", [3000], None, 16, 16, torch.float16, True, 1.0),
        ("8/8 non-causal q*20", [513, 640], None, 8, 8, torch.bfloat16, False, 20.0),
    ):
        lk = lk or lq
        q = torch.randn(1, sum(lq), hq, d, device="cuda", dtype=dtype) * mul
        k = torch.randn(1, sum(lk), hkv, d, device="cuda", dtype=dtype)
        v = torch.randn_like(k)
        cq, ck = (torch.tensor([0] + x, device="cuda").cumsum(0).to(torch.int32) for x in (lq, lk))
        lay = layout.from_cu_seqlens(cq, ck, sum(lq), sum(lk))
        saved = config.fwd_config(d)
        used = _gluon_fwd_used(q, k, v)
        outs = {}
        for name, cfg in (
            ("gluon", saved),
            ("gluon-1mb", replace(saved, gluon_group_mb=1)),
            ("triton", replace(saved, gluon_ws=0)),
            ("triton-noftz", replace(saved, gluon_ws=0, exp_ftz=False)),
        ):
            config.set_config(d, fwd=cfg)
            outs[name] = kernel_launches.forward(q, k, v, lay, Scoring(d**-0.5, causal))
        config.set_config(d, fwd=saved)
        again = kernel_launches.forward(q, k, v, lay, Scoring(d**-0.5, causal))
        same = {
            n: torch.equal(outs[n][0], outs["gluon"][0]) and torch.equal(outs[n][1], outs["gluon"][1])
            for n in ("gluon-1mb", "triton", "triton-noftz")
        }
        repeat = all(torch.equal(a, b) for a, b in zip(again, outs["gluon"]))
        record(
            "gluon-fwd",
            label,
            used and all(same.values()) and repeat,
            f"used={used} o,lse bitwise equal to Triton: {same['triton']}, to Triton without exp_ftz: "
            f"{same['triton-noftz']}, in 1 MB groups: {same['gluon-1mb']}; repeatable={repeat}",
        )


def gluon_dkdv():
    """The Gluon dK/dV kernel (Hopper) against the Triton one on the same inputs: the same products in the same
    order (equal bits where the tiles match, rounding-level differences where they do not; the FA-rule checks above
    ran through the Gluon kernel), repeatable, and bitwise the same with key blocks in pairs or one per program."""
    for label, lens, hq, hkv, d, dtype, causal in (
        ("32/8 D128 packed bf16", [1, 700, 64, 1500, 333], 32, 8, 128, torch.bfloat16, True),
        ("32/8 D128 packed fp16", packed_lengths(3000, 5, 6), 32, 8, 128, torch.float16, True),
        ("8/2 D64 packed bf16", [1, 700, 64, 1000], 8, 2, 64, torch.bfloat16, True),
        ("8/2 D64 1x2049 bf16", [2049], 8, 2, 64, torch.bfloat16, True),
        ("8/8 D128 non-causal bf16", [513, 640], 8, 8, 128, torch.bfloat16, False),
    ):
        q, k, v, cu = make_qkv(lens, hq, hkv, d, dtype)
        t = sum(lens)
        lay = layout.from_cu_seqlens(cu, cu, t, t)
        o, lse = kernel_launches.forward(q, k, v, lay, Scoring(d**-0.5, causal))
        do = torch.randn_like(o)
        saved = config.bwd_config(d)
        used = _gluon_dkdv_used(q, k, v, do)

        def run():
            return kernel_launches.backward(do, q, k, v, o, lse, lay, Scoring(d**-0.5, causal), parts=("dkdv",))[1:]

        gluon = run()
        repeat = all(torch.equal(a, b) for a, b in zip(gluon, run()))
        config.set_config(d, bwd=replace(saved, gluon_pairs=not saved.gluon_pairs))
        paired = all(torch.equal(a, b) for a, b in zip(gluon, run()))
        config.set_config(d, bwd=replace(saved, gluon_dkdv=()))
        triton_ = run()
        config.set_config(d, bwd=saved)
        diffs = [((a.float() - b.float()).abs().max() / b.float().abs().max()).item() for a, b in zip(gluon, triton_)]
        equal = [n for n, a, b in zip(("dk", "dv"), gluon, triton_) if torch.equal(a, b)]
        record(
            "gluon-dkdv",
            label,
            used and repeat and paired and max(diffs) < 1e-2,
            f"used={used} repeatable={repeat} pairs={saved.gluon_pairs} equal to pairs={not saved.gluon_pairs}: "
            f"{paired}; bitwise equal to Triton: {', '.join(equal) or 'none'}; "
            f"max rel diff dk {diffs[0]:.1e} dv {diffs[1]:.1e}",
        )


def streams():
    """The backward with dQ on a second stream beside dK/dV against both on one stream: bitwise equal, read on the
    caller's stream right after the call (so the caller's stream must have waited for the second one)."""
    for label, lens, hq, hkv, d in (
        ("32/8 D128 packed", packed_lengths(6000, 7, 8), 32, 8, 128),
        ("16/16 D64 packed", [1, 2000, 64, 3000], 16, 16, 64),
    ):
        q, k, v, cu = make_qkv(lens, hq, hkv, d, torch.bfloat16)
        t = sum(lens)
        lay = layout.from_cu_seqlens(cu, cu, t, t)
        o, lse = kernel_launches.forward(q, k, v, lay, Scoring(d**-0.5, True))
        do = torch.randn_like(o)
        saved = config.bwd_config(d)
        outs = {}
        for overlap in (False, True):
            config.set_config(d, bwd=replace(saved, overlap=overlap))
            torch.cuda._sleep(50_000_000)  # the GPU is busy when the call is queued, so a missing wait would show
            outs[overlap] = [
                g.clone() for g in kernel_launches.backward(do, q, k, v, o, lse, lay, Scoring(d**-0.5, True))
            ]
        config.set_config(d, bwd=saved)
        same = [n for n, a, b in zip(("dq", "dk", "dv"), outs[False], outs[True]) if torch.equal(a, b)]
        record(
            "streams",
            label,
            saved.overlap and len(same) == 3,
            f"default overlap={saved.overlap}; bitwise equal to one stream: {', '.join(same) or 'none'}",
        )


def end_to_end():
    """A few SGD steps of a tiny Qwen3: bf16 bridge and bf16 eager, each measured against an fp32 eager twin."""
    import copy

    from sglang_attn_bridge import register
    from transformers import Qwen3Config, Qwen3ForCausalLM

    register()
    cfg = Qwen3Config(
        vocab_size=512,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=8,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=4096,
    )
    torch.manual_seed(0)
    base = Qwen3ForCausalLM(copy.deepcopy(cfg))
    models = {}
    for name, impl, dtype in (
        ("ref32", "eager", torch.float32),
        ("eager16", "eager", torch.bfloat16),
        ("triton16", "triton", torch.bfloat16),
    ):
        m = Qwen3ForCausalLM(copy.deepcopy(cfg))  # set_attn_implementation edits the config: one copy each
        m.load_state_dict(base.state_dict())
        m = m.to("cuda", dtype)
        m.set_attn_implementation(impl)
        models[name] = m
    assert models["triton16"].config._attn_implementation == "triton"
    opt = {n: torch.optim.SGD(m.parameters(), lr=1e-2) for n, m in models.items()}
    ids = torch.randint(0, 512, (2, 300), device="cuda")
    for step in range(4):
        grads, losses = {}, {}
        for n, m in models.items():
            opt[n].zero_grad()
            loss = m(input_ids=ids, labels=ids).loss
            loss.backward()
            losses[n] = loss.item()
            grads[n] = torch.cat([p.grad.float().flatten() for p in m.parameters()])
            opt[n].step()
        err = {n: ((grads[n] - grads["ref32"]).norm() / grads["ref32"].norm()).item() for n in ("eager16", "triton16")}
        # FlashAttention's rule on the loss and the gradients: no further from fp32 than 2x eager bf16 (+ slack)
        loss_err = {n: abs(losses[n] - losses["ref32"]) for n in ("eager16", "triton16")}
        ok = err["triton16"] <= 2 * err["eager16"] + 1e-3 and loss_err["triton16"] <= 2 * loss_err["eager16"] + 1e-3
        record(
            "e2e-train",
            f"qwen3 bf16 step {step}",
            ok,
            f"loss {losses['triton16']:.4f} (eager bf16 {losses['eager16']:.4f}, fp32 {losses['ref32']:.4f}); "
            f"grad rel vs fp32: bridge {err['triton16']:.2e}, eager bf16 {err['eager16']:.2e}",
        )
    m = models["triton16"]
    with torch.no_grad():
        a, b = torch.randint(0, 512, (1, 100), device="cuda"), torch.randint(0, 512, (1, 157), device="cuda")
        packed = m(
            input_ids=torch.cat([a, b], 1), position_ids=torch.cat([torch.arange(100), torch.arange(157)])[None].cuda()
        ).logits
        sep = torch.cat([m(input_ids=a).logits, m(input_ids=b).logits], 1)
    diff = (packed.float() - sep.float()).abs().max().item()
    record("e2e-packed", "qwen3 bf16 bridge packed 100+157", diff < 5e-2, f"max|packed - separate| = {diff:.3g}")


def main():
    t0 = time.time()
    torch.manual_seed(0)
    mod = load_sglang()
    if mod is None:
        record("sglang", "wheel", False, "no sglang wheel under .whl/: bit-exact checks skipped")
    else:
        bit_exact(mod)
    os.environ["SGLANG_ATTN_BRIDGE_FORWARD"] = "auto"
    for dtype in (torch.bfloat16, torch.float16):
        fa_rule(dtype, "32/8 D128 packed causal", packed_lengths(3000, 4, 1), 32, 8, 128)
        fa_rule(dtype, "16/16 D64 packed causal", packed_lengths(2500, 3, 2), 16, 16, 64)
        fa_rule(dtype, "8/2 D128 window 200", [900, 333], 8, 2, 128, hf_window=200)
        fa_rule(dtype, "8/2 D64 softcap 20 scale 0.2", [700, 250], 8, 2, 64, softcap=20.0, scale=0.2)
        fa_rule(dtype, "8/8 D128 non-causal", [513, 640], 8, 8, 128, causal=False)
    os.environ["SGLANG_ATTN_BRIDGE_FORWARD"] = "triton"
    fa_rule(torch.bfloat16, "in-tree fwd 32/8 D128 packed", packed_lengths(3000, 4, 5), 32, 8, 128)
    os.environ["SGLANG_ATTN_BRIDGE_FORWARD"] = "auto"
    determinism()
    tma_paths()
    gluon_fwd()
    gluon_dkdv()
    streams()
    end_to_end()
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "check.json"), "w") as f:
        json.dump(rows, f, indent=1)
    bad = [r for r in rows if not r["ok"]]
    print(f"check: {len(rows) - len(bad)}/{len(rows)} passed in {time.time() - t0:.0f}s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
