"""Gate probe: FlashAttention 2 (``flash_attn``) computes attention, forward and backward, on the GPU.

bf16 inputs drawn fresh; causal and not, MHA and GQA, head dims 64 and 128; output and dq/dk/dv against fp32
attention by FlashAttention's rule (kernel_common.py). Exit 0 only if every check holds.
"""

from kernel_common import check_attention, device, finish


def run(dev) -> int:
    # imported here, after torch (kernel_common imports it), as miles imports a torch extension
    from flash_attn import flash_attn_func

    return check_attention(lambda q, k, v, causal: flash_attn_func(q, k, v, causal=causal), (64, 128), dev)


if __name__ == "__main__":
    finish(run(device()))
