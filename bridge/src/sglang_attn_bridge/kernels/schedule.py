"""Launch order: which (head, sequence, block) a program id stands for.

Programs start roughly in id order, and two wishes pull apart. The heaviest blocks (under a causal mask: the last
query rows, or the first keys) should start first, or a long one starting last leaves the GPU idle behind it. And
programs that read the same rows (one head of one sequence) should run together, so those rows come from L2 rather
than memory. So (head, sequence) pairs are taken in chunks of `chunk`; inside a chunk block 0 (the heaviest) of every
pair comes first, then block 1, and so on. A chunk covering every pair is pure longest-first; a chunk of 1 is pair by
pair. The launcher sizes chunks so that the programs in flight span a few pairs (ops._chunk).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def coords(num_heads, num_blocks, chunk):
    """(head, sequence, block) of this program; the heads of one sequence are adjacent, so GQA heads that share
    K/V rows run side by side. The sequence may be past the last one (the last chunk is padded): callers return."""
    pid = tl.program_id(0)
    per_chunk = chunk * num_blocks
    r = pid % per_chunk
    pair = pid // per_chunk * chunk + r % chunk
    return pair % num_heads, pair // num_heads, r // chunk


def grid_size(num_pairs: int, num_blocks: int, chunk: int) -> int:
    return triton.cdiv(num_pairs, chunk) * chunk * num_blocks
