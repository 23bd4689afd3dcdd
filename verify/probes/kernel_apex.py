"""Gate probe: the apex extensions miles and Megatron call compute what torch computes, on the GPU.

``fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32`` (Megatron's gradient-accumulation fusion: main_grad +=
grad_output^T @ input) against torch.matmul accumulation; ``amp_C.multi_tensor_l2norm`` and ``multi_tensor_scale``
against torch; ``fused_layer_norm_cuda.forward_affine`` against ``F.layer_norm``; ``scaled_masked_softmax_cuda``
against a masked softmax. Inputs drawn fresh, bf16 where Megatron uses it, by FlashAttention's rule against fp32
references (kernel_common.py). Exit 0 only if every check holds.
"""

import torch
import torch.nn.functional as F
from kernel_common import device, finish, rule


def run(dev) -> int:
    # imported here, after torch (kernel_common imports it), as miles imports a torch extension
    import amp_C
    import fused_layer_norm_cuda
    import fused_weight_gradient_mlp_cuda
    import scaled_masked_softmax_cuda

    n = 0
    for tokens, fin, fout in ((4096, 1024, 3072), (1000, 768, 512)):
        inp = torch.randn(tokens, fin, device=dev, dtype=torch.bfloat16)
        grad = torch.randn(tokens, fout, device=dev, dtype=torch.bfloat16)
        main = torch.randn(fout, fin, device=dev, dtype=torch.float32)
        ref = main.double() + grad.double().T @ inp.double()
        same = main + torch.matmul(grad.T, inp).float()
        out = main.clone()
        fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(inp, grad, out)
        rule(f"wgrad_gemm_accum_fp32 {tokens}x{fin}->{fout}", out, ref, same, 1e-2)
        n += 1
    tensors = [torch.randn(s, device=dev) for s in (1000, 65536 * 3 + 7, 17)]
    flag = torch.zeros(1, dtype=torch.int32, device=dev)
    norm, per = amp_C.multi_tensor_l2norm(65536, flag, [tensors], True)
    ref = torch.cat([t.double() for t in tensors]).norm()
    rule("multi_tensor_l2norm total", norm, ref, torch.cat(tensors).norm(), 1e-4)
    rule(
        "multi_tensor_l2norm per tensor",
        per,
        torch.stack([t.double().norm() for t in tensors]),
        torch.stack([t.norm() for t in tensors]),
        1e-4,
    )
    outs = [torch.empty_like(t) for t in tensors]
    amp_C.multi_tensor_scale(65536, flag, [tensors, outs], 0.37)
    rule("multi_tensor_scale", torch.cat(outs), torch.cat(tensors).double() * 0.37, torch.cat(tensors) * 0.37, 1e-6)
    n += 3
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(512, 4096, device=dev, dtype=dtype)
        w, b = torch.randn(4096, device=dev, dtype=dtype), torch.randn(4096, device=dev, dtype=dtype)
        out, _, _ = fused_layer_norm_cuda.forward_affine(x, [4096], w, b, 1e-5)
        ref = F.layer_norm(x.double(), [4096], w.double(), b.double(), 1e-5)
        # torch rounds a bf16 layer norm once (<= half an ulp); apex rounds once more (seen on an H200: 1.09 ulp at
        # the largest |out|), so bf16 gets one ulp of that magnitude as atol; fp32 keeps the plain rule
        atol = ref.abs().max().item() * 2**-7 if dtype == torch.bfloat16 else 1e-4
        rule(f"fused_layer_norm forward_affine {str(dtype)[6:]}", out, ref, F.layer_norm(x, [4096], w, b, 1e-5), atol)
        n += 1
    for sq, sk in ((128, 128), (256, 1024)):
        x = torch.randn(2, 4, sq, sk, device=dev, dtype=torch.bfloat16)
        mask = torch.rand(2, 1, sq, sk, device=dev) < 0.2
        scale = 0.125

        def masked(t):
            return (t * scale).masked_fill(mask, -10000.0).softmax(-1)

        out = scaled_masked_softmax_cuda.forward(x, mask.to(torch.uint8), scale)
        rule(f"scaled_masked_softmax {sq}x{sk}", out, masked(x.double()), masked(x.float()).to(torch.bfloat16), 1e-3)
        n += 1
    return n


if __name__ == "__main__":
    finish(run(device()))
