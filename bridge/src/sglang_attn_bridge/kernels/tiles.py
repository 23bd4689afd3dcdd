"""Row-tile loads shared by the kernels: one sequence's rows of one head, [BLOCK_R, BLOCK_D], zeros past its end.

With TMA (Hopper) the view is a tensor descriptor bounded by the sequence, so the copy engine fills the zeros and the
kernel spends no registers on addresses or masks; otherwise it is the base pointer and the load is masked. Both give
the same values, so the choice never changes a result bit.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def rows(base, length, stride, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr, HEAD_DIM: tl.constexpr, TMA: tl.constexpr):
    """A view of `length` rows of HEAD_DIM values starting at `base`, `stride` elements apart."""
    if TMA:
        return tl.make_tensor_descriptor(
            base, shape=[length, HEAD_DIM], strides=[stride, 1], block_shape=[BLOCK_R, BLOCK_D]
        )
    else:
        return base


@triton.jit
def load(
    view, start, length, stride, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr, HEAD_DIM: tl.constexpr, TMA: tl.constexpr
):
    """Rows start .. start + BLOCK_R of a `rows` view."""
    if TMA:
        return view.load([start, 0])
    else:
        offs_r = start + tl.arange(0, BLOCK_R)
        offs_d = tl.arange(0, BLOCK_D)
        mask = (offs_r < length)[:, None] & (offs_d < HEAD_DIM)[None, :]
        return tl.load(view + offs_r[:, None] * stride + offs_d[None, :], mask=mask, other=0.0)
