"""Drop-in for upstream's actor model construction: route attn_implementation="triton" through the bridge.

Three branches, so existing callers keep their behaviour:
  * not "triton"                      -> from_pretrained unchanged, 0 bridged layers;
  * "triton" off ROCm, not opted in   -> from_pretrained unchanged (transformers rejects the unknown name), 0;
  * "triton" on ROCm, or opted in     -> load with "eager", register the bridge, switch to it, n bridged layers.
Opt-in: enable_bridge=True, or SGLANG_ATTN_BRIDGE_ENABLE=1 (enable_bridge=False / =0 turns it off on ROCm too).
"""

from __future__ import annotations

from contextlib import nullcontext

import torch

from . import settings
from .registration import DEFAULT_NAME, register

ENABLE_ENV = settings.ENV["enable"]


def bridge_enabled(enable_bridge=None) -> bool:
    """The argument if given, else the `enable` setting, else whether this torch is ROCm's."""
    if enable_bridge is not None:
        return bool(enable_bridge)
    env = settings.current().enable
    if env is not None:
        return env
    return getattr(torch.version, "hip", None) is not None


def _set_implementation(model, name: str) -> None:
    """Select `name` on the model: its own setter where transformers has one, else every config directly (the
    model's own config always, so callers that read `model.config._attn_implementation` see the switch)."""
    setter = getattr(model, "set_attn_implementation", None)
    if setter is not None:
        setter(name)
        return
    config = getattr(model, "config", None)
    if config is not None:
        config._attn_implementation = name
    for module in model.modules():
        config = getattr(module, "config", None)
        if config is not None and hasattr(config, "_attn_implementation"):
            config._attn_implementation = name


def _mirror_into_shared_mapping(name: str) -> None:
    """Also write the registered function into `modeling_utils.ALL_ATTENTION_FUNCTIONS` itself (the instance every
    model reads): callers that manage that instance as a plain dict, as miles' own tests do (`pop` on cleanup),
    can only remove an entry it holds locally; a class-level registration alone makes that `pop` raise KeyError."""
    from transformers import AttentionInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    ALL_ATTENTION_FUNCTIONS[name] = AttentionInterface()[name]


def count_bridged_layers(model, name: str = DEFAULT_NAME) -> int:
    """Attention modules whose config now selects `name` (modules with a config and a head layout)."""
    n = 0
    for module in model.modules():
        config = getattr(module, "config", None)
        if config is None or getattr(config, "_attn_implementation", None) != name:
            continue
        if hasattr(module, "scaling") or type(module).__name__.endswith("Attention"):
            n += 1
    return n


def build_model_with_attn_bridge(
    model_cls,
    checkpoint_path,
    attn_implementation,
    init_context=nullcontext,
    *,
    enable_bridge=None,
    **from_pretrained_kwargs,
):
    """-> (model, n_bridged_layers). `init_context` is a callable returning a context manager (e.g. meta init)."""
    if attn_implementation != DEFAULT_NAME or not bridge_enabled(enable_bridge):
        with init_context():
            model = model_cls.from_pretrained(
                checkpoint_path, attn_implementation=attn_implementation, **from_pretrained_kwargs
            )
        return model, 0
    with init_context():
        model = model_cls.from_pretrained(checkpoint_path, attn_implementation="eager", **from_pretrained_kwargs)
    register(DEFAULT_NAME)
    _mirror_into_shared_mapping(DEFAULT_NAME)
    _set_implementation(model, DEFAULT_NAME)
    return model, count_bridged_layers(model, DEFAULT_NAME)
