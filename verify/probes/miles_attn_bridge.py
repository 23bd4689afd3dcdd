"""Gate probe: miles' own actor, asked for attn_implementation="triton", trains through sglang_attn_bridge.

Runs `FSDPTrainRayActor._build_model_with_attn_bridge` (the method miles calls, on a real tiny transformers model
with random weights saved to a temporary checkpoint), then a forward and a backward pass, and checks from the
interpreter's own call events that the attention function transformers ran, and the backward that autograd ran,
are the bridge's, that miles' vendored copy of the bridge was never imported, and that logits and gradients match
the same model in eager attention. Without a GPU the kernels run in Triton's interpreter. Exit 0 only if all hold.
Run by a command gate with the image's python; it uses the image's packages, not only the standard library.
"""

import os
import sys

if not os.environ.get("CUDA_VISIBLE_DEVICES") and not os.path.exists("/dev/kfd") and not os.path.exists("/dev/nvidia0"):
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ["SGLANG_ATTN_BRIDGE_ENABLE"] = "1"  # off ROCm, "triton" reaches the bridge only when opted in

import tempfile  # noqa: E402
from contextlib import nullcontext  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import torch  # noqa: E402
import transformers  # noqa: E402

VENDORED = "miles.backends.fsdp_utils.sglang_attn_bridge"


def fail(message: str) -> int:
    print("FAIL %s" % message)
    return 1


def tiny_checkpoint(path: str) -> None:
    config = transformers.Qwen3Config(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=64,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    transformers.Qwen3ForCausalLM(config).save_pretrained(path)


def bridge_calls(run):
    """Call events of functions defined in the sglang_attn_bridge package while `run()` runs, by name."""
    import sglang_attn_bridge

    root = os.path.dirname(sglang_attn_bridge.__file__) + os.sep
    seen = {}

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(root):
            seen[frame.f_code.co_name] = seen.get(frame.f_code.co_name, 0) + 1

    # autograd runs backward nodes on its own threads on some builds: trace those too
    import threading

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        result = run()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return result, seen


def main() -> int:
    from miles.backends.fsdp_utils.actor import FSDPTrainRayActor

    with tempfile.TemporaryDirectory() as ckpt:
        tiny_checkpoint(ckpt)
        actor = object.__new__(FSDPTrainRayActor)
        actor.args = SimpleNamespace(attn_implementation="triton")
        actor.get_model_cls = lambda: transformers.AutoModelForCausalLM
        model, bridged = actor._build_model_with_attn_bridge(ckpt, nullcontext)
        reference = transformers.AutoModelForCausalLM.from_pretrained(ckpt, attn_implementation="eager")

    impl = model.config._attn_implementation
    if impl != "triton":
        return fail("model.config._attn_implementation is %r, not 'triton'" % impl)
    if bridged != 2:
        return fail("the actor reported %d bridged layers, the model has 2" % bridged)
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    fn = ALL_ATTENTION_FUNCTIONS["triton"]
    if not fn.__module__.startswith("sglang_attn_bridge"):
        return fail("'triton' is registered to %s.%s, not the bridge" % (fn.__module__, fn.__qualname__))

    ids = torch.randint(0, 128, (2, 24), generator=torch.Generator().manual_seed(1))
    loss, forward_calls = bridge_calls(lambda: model(input_ids=ids, labels=ids).loss)
    _, backward_calls = bridge_calls(loss.backward)
    grad = model.model.layers[0].self_attn.q_proj.weight.grad
    ref_loss = reference(input_ids=ids, labels=ids).loss
    ref_loss.backward()
    ref_grad = reference.model.layers[0].self_attn.q_proj.weight.grad
    ran = forward_calls.get(fn.__name__, 0)
    if ran != 2:
        return fail(
            "the bridge's %s ran %d times for 2 layers (bridge calls seen: %s)"
            % (fn.__name__, ran, sorted(forward_calls))
        )
    if not backward_calls:
        return fail("no function of the bridge ran during backward: autograd did not use the bridge's backward")
    if any(name == VENDORED or name.startswith(VENDORED + ".") for name in sys.modules):
        return fail("miles' vendored %s was imported" % VENDORED)
    loss, ref_loss = loss.detach(), ref_loss.detach()
    if not torch.allclose(loss, ref_loss, rtol=1e-4, atol=1e-5):
        return fail("loss %.6f differs from eager attention's %.6f" % (loss, ref_loss))
    if not torch.allclose(grad, ref_grad, rtol=1e-3, atol=1e-5) or not grad.abs().sum() > 0:
        return fail(
            "q_proj gradient differs from eager attention's (max abs diff %.3g)" % (grad - ref_grad).abs().max()
        )
    print(
        "PASS miles actor -> sglang_attn_bridge: %d layers bridged, %s ran %d times, %d bridge calls in backward, "
        "loss %.6f = eager %.6f" % (bridged, fn.__name__, ran, sum(backward_calls.values()), loss, ref_loss)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
