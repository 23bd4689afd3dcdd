"""Checks every entry point makes before anything runs: shapes, head dims, GQA grouping and dtypes."""

from __future__ import annotations

import torch

from .errors import BridgeUnsupported

DTYPES = (torch.bfloat16, torch.float16, torch.float32)
MAX_HEAD_DIM = 256


def refuse(what: str):
    raise BridgeUnsupported(f"attn_implementation='triton' does not support {what}; use 'eager' or 'sdpa' for it")


def check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, head_axis: int) -> None:
    """q/k/v with their heads on `head_axis` and the head dim last."""
    head_dim = q.shape[-1]
    if v.shape[-1] != head_dim or k.shape[-1] != head_dim:
        refuse(f"different query/key/value head dims ({head_dim}, {k.shape[-1]}, {v.shape[-1]})")
    if head_dim > MAX_HEAD_DIM:
        refuse(f"head_dim {head_dim} (at most {MAX_HEAD_DIM})")
    hq, hkv = q.shape[head_axis], k.shape[head_axis]
    if v.shape[head_axis] != hkv:
        refuse(f"{hkv} key heads with {v.shape[head_axis]} value heads")
    if hq % hkv:
        refuse(f"{hq} query heads over {hkv} key/value heads (must divide)")
    if q.dtype not in DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        refuse(f"dtypes {q.dtype}/{k.dtype}/{v.dtype} (fp16, bf16 or fp32, all the same)")
