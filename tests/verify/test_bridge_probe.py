"""The bridge-attention probe (verify/probes/bridge_attention.py) against stand-in bridges on PYTHONPATH: it passes
a correct attention function and fails one that raises, is wrong forward, is wrong backward or returns the wrong
layout, naming what is wrong in its last line. Host torch and transformers, the CPU; no engine."""

import subprocess
import sys

import pytest
from support import ROOT

PROBE = ROOT / "verify" / "probes" / "bridge_attention.py"

# A stand-in bridge: register() puts ATTENTION (torch SDPA, causal, GQA by repeat) under "triton", as the real one
# does through transformers' public AttentionInterface. Each case below breaks one thing.
BRIDGE = """
import torch
from transformers import AttentionInterface


def _segments(position_ids, seq):
    if position_ids is None:
        return [(0, seq)]
    starts = [i for i, p in enumerate(position_ids[0].tolist()) if p == 0] + [seq]
    return list(zip(starts[:-1], starts[1:]))


def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    group = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(group, 1), value.repeat_interleave(group, 1)
    outs = []
    for s, e in _segments(kwargs.get("position_ids"), query.shape[2]):
        outs.append(torch.nn.functional.scaled_dot_product_attention(
            query[:, :, s:e], key[:, :, s:e], value[:, :, s:e], is_causal=CAUSAL, scale=scaling))
    out = torch.cat(outs, dim=2)
    return LAYOUT(out), None

CAUSAL = True
LAYOUT = lambda out: out.transpose(1, 2)
BREAK = None


def register(name="triton"):
    fn = attention if BREAK is None else BREAK
    fn.__module__ = __name__
    AttentionInterface.register(name, fn)
    return name
"""


CASES = {
    "correct": ("", 0, "PASS triton attention through AttentionInterface, forward and backward, 2 cases"),
    "raises": (
        "def BREAK(*a, **k):\n    raise RuntimeError('seeded kernel failure')\n",
        1,
        "raised RuntimeError: seeded kernel failure",
    ),
    "not causal": ("CAUSAL = False\n", 1, "out relative error"),
    "wrong layout": ("LAYOUT = lambda out: out\n", 1, "output shape (2, 4, 24, 16), expected (2, 24, 4, 16)"),
    "wrong backward": (
        "class _Scale(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x):\n"
        "        return x.clone()\n"
        "    @staticmethod\n"
        "    def backward(ctx, g):\n"
        "        return g * 0.5\n"
        "_plain = attention\n"
        "def BREAK(module, q, k, v, mask, **kw):\n"
        "    out, _ = _plain(module, q, k, v, mask, **kw)\n"
        "    return _Scale.apply(out), None\n",
        1,
        "dq relative error",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_probe_judges_the_registered_attention(tmp_path, case):
    extra, code, needle = CASES[case]
    pkg = tmp_path / "sglang_attn_bridge"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(BRIDGE + extra)
    proc = subprocess.run(
        [sys.executable, str(PROBE)],
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    last = proc.stdout.strip().splitlines()[-1]
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert needle in last, proc.stdout + proc.stderr
    if code:
        assert last.startswith("FAIL triton attention")


def test_probe_refuses_a_function_that_is_not_the_bridges(tmp_path):
    pkg = tmp_path / "sglang_attn_bridge"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        BRIDGE.replace("    fn.__module__ = __name__\n", "    fn.__module__ = 'elsewhere'\n")
    )
    proc = subprocess.run(
        [sys.executable, str(PROBE)], env={"PYTHONPATH": str(tmp_path)}, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 1 and "not the bridge's" in proc.stdout.strip().splitlines()[-1], proc.stdout
