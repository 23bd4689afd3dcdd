"""Registration through transformers' public interfaces, and the three branches of build_model_with_attn_bridge."""

import pytest
import torch
from sglang_attn_bridge import build_model_with_attn_bridge, register
from sglang_attn_bridge.hf_attention import triton_attention_forward
from sglang_attn_bridge.mask import triton_mask
from torch import nn


def test_registration_visible_from_new_instances():
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    assert register() == "triton"
    assert AttentionInterface()["triton"] is triton_attention_forward
    assert AttentionMaskInterface()["triton"] is triton_mask
    assert "triton" in AttentionInterface().valid_keys()


def test_register_rejects_names_with_special_paths():
    with pytest.raises(ValueError):
        register("flash_triton")
    with pytest.raises(ValueError):
        register("org/kernel")


class _Config:
    def __init__(self, impl):
        self._attn_implementation = impl


class FakeAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.scaling = 0.125


class RecordingModel(nn.Module):
    """Stands in for a transformers model class: records from_pretrained calls, holds two attention layers."""

    calls = []

    def __init__(self, impl):
        super().__init__()
        self.config = _Config(impl)
        self.layers = nn.ModuleList([FakeAttention(self.config), FakeAttention(self.config)])
        self.mlp = nn.Linear(2, 2)

    @classmethod
    def from_pretrained(cls, path, attn_implementation=None, **kwargs):
        if attn_implementation not in ("eager", "sdpa"):
            raise ValueError(f"Specified attn_implementation={attn_implementation!r} is not supported")
        cls.calls.append((path, attn_implementation, kwargs))
        return cls(attn_implementation)

    def set_attn_implementation(self, name):
        self.config._attn_implementation = name


@pytest.fixture
def rec(bridge_settings, monkeypatch):
    RecordingModel.calls = []
    bridge_settings(enable=None)
    monkeypatch.setattr(torch.version, "hip", None)
    return RecordingModel


def test_other_implementations_pass_through(rec):
    model, n = build_model_with_attn_bridge(rec, "/ckpt", "sdpa", torch_dtype="x")
    assert n == 0 and rec.calls == [("/ckpt", "sdpa", {"torch_dtype": "x"})]


def test_triton_off_rocm_is_passed_unchanged(rec):
    with pytest.raises(ValueError, match="not supported"):
        build_model_with_attn_bridge(rec, "/ckpt", "triton")
    assert rec.calls == []


def test_triton_on_rocm_loads_eager_then_bridges(rec, monkeypatch):
    monkeypatch.setattr(torch.version, "hip", "7.0.0")
    entered = []

    class Ctx:
        def __enter__(self):
            entered.append(True)

        def __exit__(self, *a):
            return False

    model, n = build_model_with_attn_bridge(rec, "/ckpt", "triton", init_context=Ctx, revision="r")
    assert rec.calls == [("/ckpt", "eager", {"revision": "r"})]
    assert entered == [True]
    assert n == 2 and model.config._attn_implementation == "triton"


def test_rocm_can_opt_out(rec, monkeypatch):
    monkeypatch.setattr(torch.version, "hip", "7.0.0")
    with pytest.raises(ValueError):
        build_model_with_attn_bridge(rec, "/ckpt", "triton", enable_bridge=False)


@pytest.mark.parametrize("how", ["argument", "env"])
def test_opt_in_off_rocm(bridge_settings, rec, monkeypatch, how):
    kwargs = {}
    if how == "argument":
        kwargs["enable_bridge"] = True
    else:
        bridge_settings(enable=True)
    model, n = build_model_with_attn_bridge(rec, "/ckpt", "triton", **kwargs)
    assert n == 2 and rec.calls[0][1] == "eager"


def test_model_without_setter_or_config_attribute_gets_the_bridge_selected(monkeypatch):
    """A model with neither set_attn_implementation nor a config that already names an implementation (miles'
    tests use such a stub) still reports the switch on model.config."""
    from types import SimpleNamespace

    class Bare(nn.Module):
        def __init__(self):
            super().__init__()
            self.config = SimpleNamespace()

    class Cls:
        @staticmethod
        def from_pretrained(path, **kwargs):
            assert kwargs["attn_implementation"] == "eager"
            return Bare()

    monkeypatch.setattr(torch.version, "hip", "6.0.0")
    model, _ = build_model_with_attn_bridge(Cls, "/ckpt", "triton")
    assert model.config._attn_implementation == "triton"
    # Callers may manage the mapping transformers' models read as a plain dict (miles' tests pop it on cleanup).
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    assert ALL_ATTENTION_FUNCTIONS.pop("triton") is ALL_ATTENTION_FUNCTIONS["triton"]  # the class-level one stays
