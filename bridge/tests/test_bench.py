"""The bench's harness on the CPU (bridge/bench/; the timing itself needs a GPU): every entry answers --help, the
public calls it times compute the same function for the bridge and SDPA (the packed row's SDPA baseline, one call
per sequence, too), a variant is undone after its block, and every table renders from rows shaped as the entries
write them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import bench  # noqa: E402
import harness as h  # noqa: E402


@pytest.mark.parametrize("entry", [*bench.ENTRIES, "regs"])
def test_every_entry_answers_help(entry, capsys):
    try:
        rc = bench.main([entry, "--help"])
    except SystemExit as e:  # argparse's --help
        rc = e.code
    assert rc == 0
    assert len(capsys.readouterr().out) > 200


def test_unknown_entry_lists_the_entries(capsys):
    assert bench.main(["nope"]) == 2
    assert "first-use" in capsys.readouterr().out


def test_shapes_keep_the_names_the_docs_quote():
    names = set(h.SHAPES)
    for n in ("1x8192 32/8 D128", "4x4096 32/8 D128", "4x4096 16/16 D128", "4x4096 32/8 D64", "2x2048 32/8 D128"):
        assert n in names
    packed = h.SHAPES["packed 26 seqs=18432 32/8 D128"]
    assert sum(packed.lens()) == packed.seq == packed.tokens and len(packed.lens()) == 26
    assert [s.tokens for s in h.pick_shapes("1x16384,1x32768")] == [16384, 32768]


@pytest.mark.parametrize("packed", [False, True])
def test_bridge_and_sdpa_calls_compute_the_same_function(packed):
    from sglang_attn_bridge import register

    register()
    shape = h.Shape("tiny", 3 if packed else 2, 48, 4, 2, 32, packed=packed)
    call = h.inputs(shape, dtype=torch.float32, device="cpu")
    outs, grads = {}, {}
    for impl in ("bridge", "sdpa"):
        outs[impl] = h.public(impl, call, backward=False)().detach()
        out = h.public(impl, call, backward=False)()
        out.backward(call.do)
        grads[impl] = [x.grad.clone() for x in (call.q, call.k, call.v)]
        call.q.grad = call.k.grad = call.v.grad = None
        h.public(impl, call, backward=True)()  # the timed callable drops its gradients
        assert call.q.grad is None
    torch.testing.assert_close(outs["bridge"], outs["sdpa"], atol=2e-5, rtol=2e-5)
    for a, b in zip(grads["bridge"], grads["sdpa"]):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_a_variant_is_undone_after_its_block():
    from sglang_attn_bridge import config, settings

    name, var = h.parse_variant("dq 128x64, one stream:gluon_dq=(128, 64, 8),overlap=0,portable=1")
    assert name == "dq 128x64, one stream" and var == {"gluon_dq": (128, 64, 8), "overlap": 0, "portable": 1}
    before = config.GPU_BWD[128], settings.current()
    with h.apply_variant(var, 128):
        assert config.GPU_BWD[128].gluon_dq == (128, 64, 8) and not config.GPU_BWD[128].overlap
        assert settings.current().portable
    assert (config.GPU_BWD[128], settings.current()) == before


def test_tables_render():
    import first_use
    import launch_cost
    import memory
    import speed

    meta = {"gpu": "GPU", "nvidia_smi": "GPU, 1.2.3", "torch": "t"}
    t = {"ms": 1.0, "host_us": 500.0, "device_ms": 0.9, "ms_range": [0.9, 1.1]}
    times = {f"{i} {p}": dict(t) for i in ("bridge", "sdpa") for p in ("fwd", "fwd+bwd")}
    times["bridge x fwd"] = "RuntimeError: no"
    rows = [
        {"shape": "s", "times": times, "peak_mib": {"bridge fwd+bwd": 10.0}, "equals_sglang": True},
        {"shape": "broken", "times": {"error": "OutOfMemoryError"}, "peak_mib": {}},
    ]
    assert "| s | 1.000 | 1.000 | 1.00x |" in speed.table(meta, rows)
    assert "driver 1.2.3" in speed.table(meta, rows)
    mem = [{"shape": "s", "inputs MiB": 3.0, "bridge": {"fwd peak": 1.0}, "sdpa": {"error": "x"}}]
    assert "| s | 3 | 1 / - |" in memory.table(meta, mem)
    fu = [{"class": "bf16 D128", "state": "cold", "bridge first fwd+bwd s": 20.0, "probe": ["equal"]}]
    assert "20.00" in first_use.table(meta, fu)
    lc = {"s": {"host_us": {"a": 1.0}, "bridge kernels us": {"k": 2.0}, "sdpa kernels us": {}}}
    assert "| a | 1 |" in launch_cost.table(meta, lc)
