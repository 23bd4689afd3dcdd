"""Turn transformers' ways of describing sequences into one varlen layout for the kernels.

A batch [B, S] holds sequences; each is (row, first query position, first key position, query length, key length).
Three sources, in transformers' own order of precedence (as its flash-attention path):
  1. a 2D padding mask (from our mask function): one sequence per row, its contiguous unmasked run;
  2. cu_seq_lens_q/k kwargs (batch 1, packed) or position_ids that do not step by +1 (packed, any batch);
  3. otherwise one full sequence per row, with no host sync at all (kept per shape and device).
Packed/padded layouts need the lengths on the host once (grid size); the result is cached for as long as the same
mask/position tensor object is alive, so the layers of one forward pay for it once.
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass

import torch

from .errors import BridgeUnsupported


@dataclass(frozen=True)
class Varlen:
    row: torch.Tensor  # int32 [n]
    q_start: torch.Tensor
    k_start: torch.Tensor
    len_q: torch.Tensor
    len_k: torch.Tensor
    n: int
    max_q: int
    max_k: int
    covers_all: bool  # every query/key slot of [B, S] belongs to a sequence (outputs need no zero fill)

    @functools.cached_property
    def signature(self) -> tuple:
        """What a kernel launch specializes on in this layout: the grid's sizes and whether every array is 16-byte
        aligned (Triton's pointer specialization). Worked out once per layout object."""
        arrays = (self.row, self.q_start, self.k_start, self.len_q, self.len_k)
        return self.n, self.max_q, self.max_k, self.covers_all, all(a.data_ptr() % 16 == 0 for a in arrays)

    def cu_seqlens(self):
        """(cu_q, cu_k) int32 for a packed copy of the sequences, in layout order."""
        z = torch.zeros(1, dtype=torch.int32, device=self.len_q.device)
        return (
            torch.cat([z, self.len_q.cumsum(0, dtype=torch.int32)]),
            torch.cat([z, self.len_k.cumsum(0, dtype=torch.int32)]),
        )

    def token_index(self, seq_len: int, which: str) -> torch.Tensor:
        """Flat indices (row * seq_len + position) of every token, in layout order (for packing/unpacking copies)."""
        start, length = (self.q_start, self.len_q) if which == "q" else (self.k_start, self.len_k)
        base = self.row.long() * seq_len + start.long()
        lens = length.long()
        first = torch.repeat_interleave(base, lens)
        offs = torch.arange(int(lens.sum()), device=lens.device) - torch.repeat_interleave(lens.cumsum(0) - lens, lens)
        return first + offs


def _i32(x, device):
    return torch.as_tensor(x, dtype=torch.int32, device=device)


def dense(batch: int, seq_q: int, seq_k: int, device) -> Varlen:
    """One full sequence per row; kept per shape, so the layers of a forward (and later steps) make it once."""
    return _dense(batch, seq_q, seq_k, torch.device(device))


@functools.lru_cache(maxsize=64)
def _dense(batch: int, seq_q: int, seq_k: int, device: torch.device) -> Varlen:
    z = torch.zeros(batch, dtype=torch.int32, device=device)
    return Varlen(
        torch.arange(batch, dtype=torch.int32, device=device),
        z,
        z,
        torch.full((batch,), seq_q, dtype=torch.int32, device=device),
        torch.full((batch,), seq_k, dtype=torch.int32, device=device),
        batch,
        seq_q,
        seq_k,
        True,
    )


def from_cu_seqlens(cu_q, cu_k, seq_q: int, seq_k: int, max_q=None, max_k=None) -> Varlen:
    cu_q, cu_k = cu_q.to(torch.int32), cu_k.to(torch.int32)
    host = torch.stack([cu_q, cu_k]).cpu() if cu_q.shape == cu_k.shape else None
    if host is None:
        raise BridgeUnsupported("cu_seq_lens_q and cu_seq_lens_k must describe the same number of sequences")
    lq, lk = (host[0, 1:] - host[0, :-1]), (host[1, 1:] - host[1, :-1])
    if (lq < 0).any() or (lk < lq).any() or host[0, -1] > seq_q or host[1, -1] > seq_k:
        raise BridgeUnsupported(f"cu_seq_lens do not describe packed sequences of this batch: {host.tolist()}")
    n = len(lq)
    dev = cu_q.device
    return Varlen(
        torch.zeros(n, dtype=torch.int32, device=dev),
        cu_q[:-1].contiguous(),
        cu_k[:-1].contiguous(),
        _i32(lq, dev),
        _i32(lk, dev),
        n,
        int(max_q) if max_q is not None else int(lq.max()),
        int(max_k) if max_k is not None else int(lk.max()),
        bool(host[0, -1] == seq_q and host[1, -1] == seq_k),
    )


def from_position_ids(position_ids: torch.Tensor, batch: int, seq: int) -> Varlen:
    """Sequences start where position_ids does not step by +1 (transformers' packed-sequence rule)."""
    pos = position_ids.expand(batch, -1)
    starts = torch.ones_like(pos, dtype=torch.bool)
    starts[:, 1:] = (pos[:, 1:] - pos[:, :-1]) != 1
    r, s = starts.nonzero(as_tuple=True)
    r, s = r.cpu(), s.cpu()
    if len(r) == batch:  # no restarts: a plain batch, nothing to pack
        return dense(batch, seq, seq, position_ids.device)
    ends = torch.cat([s[1:], torch.tensor([seq])])
    ends[torch.cat([r[1:] != r[:-1], torch.tensor([True])])] = seq
    lens = ends - s
    dev = position_ids.device
    return Varlen(
        _i32(r, dev),
        _i32(s, dev),
        _i32(s, dev),
        _i32(lens, dev),
        _i32(lens, dev),
        len(r),
        int(lens.max()),
        int(lens.max()),
        True,
    )


def from_padding_mask(mask: torch.Tensor, seq_q: int) -> Varlen:
    """mask [B, Sk] bool, True = real token; each row's real tokens must be one contiguous run (left or right pad)."""
    batch, seq_k = mask.shape
    m = mask.to(torch.bool)
    idx = torch.arange(seq_k, device=m.device)
    count = m.sum(1)
    first = torch.where(m, idx, seq_k).amin(1)
    last = torch.where(m, idx, -1).amax(1)
    qm = m[:, seq_k - seq_q :]
    q_count = qm.sum(1)
    q_first = torch.where(qm, idx[:seq_q], seq_q).amin(1)
    host = torch.stack([count, first, last, q_count, q_first]).cpu()
    count, first, last, q_count, q_first = host
    has = count > 0
    if (has & (last - first + 1 != count)).any():
        raise BridgeUnsupported(
            "the attention mask has holes inside a row; the triton bridge needs each row's tokens contiguous "
            "(left or right padding). Use attn_implementation='sdpa' or 'eager' for arbitrary masks."
        )
    q_end_abs = (seq_k - seq_q) + q_first + q_count
    if (has & (q_count > 0) & (q_end_abs != last + 1)).any() or (q_count > count).any():
        raise BridgeUnsupported("query tokens must be the last real tokens of each row (left padding with a cache)")
    first = torch.where(has, first, 0)
    q_first = torch.where(q_count > 0, q_first, 0)
    dev = mask.device
    return Varlen(
        torch.arange(batch, dtype=torch.int32, device=dev),
        _i32(q_first, dev),
        _i32(first, dev),
        _i32(q_count, dev),
        _i32(count, dev),
        batch,
        max(int(q_count.max()), 1),
        max(int(count.max()), 1),
        bool((q_count == seq_q).all() and (count == seq_k).all()),
    )


class _Cache:
    """Remembers the layout derived from one tensor object while it lives (weakref + in-place version)."""

    def __init__(self):
        self._key = None
        self._value = None

    def get(self, src: torch.Tensor, extra):
        if self._key is not None:
            ref, version, ex = self._key
            if ref() is src and version == src._version and ex == extra:
                return self._value
        return None

    def put(self, src: torch.Tensor, extra, value):
        try:
            self._key = (weakref.ref(src), src._version, extra)
            self._value = value
        except TypeError:
            self._key = None
        return value


_mask_cache = _Cache()
_pos_cache = _Cache()


def build(
    batch,
    seq_q,
    seq_k,
    device,
    attention_mask=None,
    position_ids=None,
    cu_seq_lens_q=None,
    cu_seq_lens_k=None,
    max_length_q=None,
    max_length_k=None,
) -> Varlen:
    if attention_mask is not None:
        if not isinstance(attention_mask, torch.Tensor) or attention_mask.dim() != 2:
            raise BridgeUnsupported(
                "the triton bridge takes only the 2D padding mask its own mask function produces; got "
                f"{type(attention_mask).__name__} of shape {getattr(attention_mask, 'shape', None)}. A custom 4D "
                "mask needs attn_implementation='sdpa' or 'eager'."
            )
        if cu_seq_lens_q is not None:
            raise BridgeUnsupported("give either a padding attention_mask or cu_seq_lens_q/k, not both")
        mask = attention_mask[:, -seq_k:]
        if mask.shape[0] != batch or mask.shape[1] != seq_k:
            raise BridgeUnsupported(
                f"attention_mask of shape {tuple(attention_mask.shape)} does not fit a batch of {batch} x {seq_k} keys"
            )
        extra = (batch, seq_q, seq_k)
        hit = _mask_cache.get(attention_mask, extra)
        return hit if hit is not None else _mask_cache.put(attention_mask, extra, from_padding_mask(mask, seq_q))
    if cu_seq_lens_q is not None or cu_seq_lens_k is not None:
        if batch != 1:
            raise BridgeUnsupported(f"cu_seq_lens_q/k describe a packed batch of size 1, got batch {batch}")
        cu_k = cu_seq_lens_k if cu_seq_lens_k is not None else cu_seq_lens_q
        cu_q = cu_seq_lens_q if cu_seq_lens_q is not None else cu_seq_lens_k
        extra = (seq_q, seq_k, id(cu_k))
        hit = _pos_cache.get(cu_q, extra)
        if hit is not None:
            return hit
        return _pos_cache.put(cu_q, extra, from_cu_seqlens(cu_q, cu_k, seq_q, seq_k, max_length_q, max_length_k))
    if position_ids is not None and seq_q == seq_k and seq_q > 1:
        if position_ids.dim() != 2 or position_ids.shape[-1] != seq_q or position_ids.shape[0] not in (1, batch):
            raise BridgeUnsupported(f"position_ids of shape {tuple(position_ids.shape)} do not fit {batch} x {seq_q}")
        extra = (batch, seq_q)
        hit = _pos_cache.get(position_ids, extra)
        return (
            hit
            if hit is not None
            else _pos_cache.put(position_ids, extra, from_position_ids(position_ids, batch, seq_q))
        )
    return dense(batch, seq_q, seq_k, device)
