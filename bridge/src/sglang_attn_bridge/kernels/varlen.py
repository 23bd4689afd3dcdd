"""Where a program's rows lie in a varlen batch, for all three kernels.

A batch is five int32 arrays with one entry per sequence: its row in the batch, the positions of its first query and
first key in that row, and its query and key lengths; so packed, padded and plain batches are all one launch. Grids
are (head, sequence, block) with block 0 the heaviest block under a causal mask: every long program is launched
before any short one, so none of them trails at the end.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def query_block(LenQ, BLOCK_M: tl.constexpr):
    """(head, sequence, query length, first query row) of this program. Block 0 is the sequence's last query block,
    the one that sees the most keys; past the sequence's first block the row is negative and the caller returns."""
    seq = tl.program_id(1)
    len_q = tl.load(LenQ + seq)
    return tl.program_id(0), seq, len_q, (tl.cdiv(len_q, BLOCK_M) - 1 - tl.program_id(2)) * BLOCK_M


@triton.jit
def offsets(seq, Row, QStart, KStart):
    """(batch row, first query position, first key position) of a sequence, in int64 for address arithmetic."""
    return (tl.load(Row + seq).to(tl.int64), tl.load(QStart + seq).to(tl.int64), tl.load(KStart + seq).to(tl.int64))
