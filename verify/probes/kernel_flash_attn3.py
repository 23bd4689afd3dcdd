"""Gate probe: FlashAttention 3 (``flash_attn_interface``, Hopper) computes attention, forward and backward, on the GPU.

bf16 inputs drawn fresh; causal and not, MHA and GQA, head dim 128 (what every FA3 build has); output and
dq/dk/dv against fp32 attention by FlashAttention's rule (kernel_common.py). Exit 0 only if every check holds.
"""

from kernel_common import check_attention, device, finish


def first(result):
    """FA3's flash_attn_func returns the output, or (output, lse) in some of its versions."""
    return result[0] if isinstance(result, tuple) else result


def run(dev) -> int:
    # imported here, after torch (kernel_common imports it), as miles imports a torch extension
    from flash_attn_interface import flash_attn_func as fa3_func

    return check_attention(lambda q, k, v, causal: first(fa3_func(q, k, v, causal=causal)), (128,), dev)


if __name__ == "__main__":
    finish(run(device()))
