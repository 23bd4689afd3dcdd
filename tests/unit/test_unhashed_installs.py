"""Every pip install of a GPU render (CUDA and ROCm) installs a locked file, a pinned tree with --no-deps, or nothing
(an offline check): the one exception is flashinfer's own index (CUDA only), which this host cannot reach to lock
(ci/unhashed_installs.py)."""

from __future__ import annotations

import pytest

from ci.unhashed_installs import problems
from toolkit.plan.build_plan import make_plan
from toolkit.render.dockerfile import render
from toolkit.spec.catalog import load_catalog

CATALOG = load_catalog()
CUDA = [name for name, v in CATALOG.variants.items() if v.family == "cuda"]
ROCM = [name for name, v in CATALOG.variants.items() if v.family == "rocm"]


@pytest.mark.parametrize("name", CUDA)
def test_a_cuda_image_installs_only_locked_files(name):
    found = problems(render(make_plan(CATALOG.resolve(name), revision="t")))
    assert [p for p in found if "flashinfer-cubin==" not in p] == []


@pytest.mark.parametrize("name", ROCM)
def test_a_rocm_image_installs_only_locked_files(name):
    """The ROCm closure (the base's own torch, triton and kernels left to the base) covers every install: flash-attn's
    sdist, mooncake's py files and every pin by hash, the trees (Megatron-LM editable) with --no-deps."""
    plan = make_plan(CATALOG.resolve(name), revision="t")
    assert plan.variant.closure, "the lock holds no closure for " + name
    text = render(plan)
    assert problems(text) == []
    assert "--require-hashes --no-deps --only-binary :all: -r /tmp/closure.txt" in text
    assert "--no-deps --require-hashes --target=/tmp/py-files" in text


def test_no_rocm_closure_holds_the_index_torch_or_cuda_wheels():
    """The base's own ROCm torch is never replaced by the index's CUDA build, nor joined by its triton or CUDA
    libraries."""
    for name in ROCM:
        for packages in CATALOG.resolve(name).closure.values():
            pure = ("nvidia-modelopt", "nvidia-ml-py")  # a spec pin and its NVML binding: Python only, no CUDA
            base = ("torch", "torchvision", "torchaudio", "triton", "pytorch-triton-rocm", "sglang", "sgl-kernel")
            cuda = [n for n in packages if n in base or n.startswith("nvidia-")]
            assert [n for n in cuda if n not in pure] == [], name


def test_the_check_sees_an_install_that_resolves_on_its_own():
    run = "RUN pip install --no-cache-dir flash-linear-attention==0.4.2 && pip install --no-deps /tmp/src/x\n"
    assert problems(run) == ["pip install --no-cache-dir flash-linear-attention==0.4.2"]
    hashed = "RUN pip install --no-deps --require-hashes -r /tmp/pip-locked.txt\n"
    assert problems(hashed) == [] and problems("RUN pip install -e /root/Megatron-LM\n") != []
