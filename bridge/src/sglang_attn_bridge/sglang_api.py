"""Where sglang keeps the extend-attention kernel the bridge calls, and how the bridge calls it. Data only.

This table is the one home of those module paths and keywords. `sglang_resolution` resolves the kernel from it at run
time; an image's build gate (the `verify` runner, signature entries with `resolve`) reads the same table from this
file's source with ``ast.literal_eval``, without importing anything, and checks that the image's sglang accepts the
call. So it must stay literals only (no names, no expressions).

Keys: ``function``; ``modules``, tried in order, the first that defines ``function`` is the one called; ``keywords``,
passed by every call, always by keyword (the gate requires all of them); ``optional``, the keywords the bridge leaves
out when a kernel lacks them (it then refuses only calls that need a non-default value); ``groups``, keywords passed
together where the kernel takes any of them.
"""

EXTEND_ATTENTION = {
    "function": "extend_attention_fwd_unified",
    "modules": [
        "sglang.kernels.ops.attention.extend_attention",  # sglang 0.5.16 and later
        "sglang.srt.layers.attention.triton_ops.extend_attention",  # sglang up to 0.5.14
    ],
    "keywords": [
        "q",
        "o",
        "k_buffer",
        "v_buffer",
        "qo_indptr",
        "kv_indptr",
        "kv_indices",
        "prefix_lens",
        "max_len_extend",
        "sm_scale",
        "is_causal",
        "sliding_window_size",
        "logit_cap",
    ],
    "optional": ["is_causal", "sliding_window_size", "logit_cap"],
    # Required positionals from sglang 0.5.10 on; the bridge passes 1.0 for both.
    "groups": [["k_scale", "v_scale"]],
}
